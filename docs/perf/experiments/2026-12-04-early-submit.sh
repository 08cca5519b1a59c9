#!/usr/bin/env bash
# A prefill window's command queued in parts while it is recorded (CommandList::submit_early),
# against the command queued whole after its recording (DELTALLM_VK_EARLY_SUBMIT=0), the same
# binary: pp512 and pp2048 (bench: a fresh session a repetition, so every repetition records its
# window command), three rounds, the order of the two flipped every round; then the changed
# paths under the Khronos validation layer. The packed build of scripts/vk/device_reports.sh
# prepare.
cd "$(dirname "$0")/../../.."
source docs/perf/experiments/device.sh
synth "qwen35 0.8b q08" "qwen35 9b q9" "qwen3 8b q8b"
rates() {
    python3 -c "import json,sys; print(' '.join('%s %s' % (r['test'], [round(x) for x in r['samples_ts']]) for r in json.load(sys.stdin)['rows']))"
}
pp() {
    local m=$1
    shift
    env "$@" $B bench -m /tmp/$m.gguf --device vulkan -p 512,2048 -n 0 -r 3 -o json 2>/dev/null | rates
}
warm
for round in 1 2 3; do
    order="1 0"
    [ $round = 2 ] && order="0 1"
    for m in q08 q9 q8b; do
        for e in $order; do
            echo "round $round $m early=$e $(pp $m DELTALLM_VK_EARLY_SUBMIT=$e)"
        done
    done
done
DELTALLM_LOG=debug $B bench -m /tmp/q8b.gguf --device vulkan -p 512 -n 0 -r 2 2>&1 | grep recorded | tail -2
validate 'VulkanCommandList.*:WindowPrefill.*:VulkanDriver.*'
