#!/usr/bin/env bash
# Where Qwen3-8B's pp512 spreads between calls (11.9k -> 10.4-11.2k t/s with no prefill change):
# the host's part of a prompt (the window command recorded in each fresh session, timed by the
# bench) beside the repetitions' rates, on the packed build (scripts/vk/device_reports.sh prepare).
cd "$(dirname "$0")/../../.."
source docs/perf/experiments/device.sh
synth "qwen3 8b q8b" "qwen35 9b q9"
nproc; grep -m1 "model name" /proc/cpuinfo
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
rates() {
    python3 -c "import json,sys; [print('$1', r['test'], [round(x) for x in r['samples_ts']]) for r in json.load(sys.stdin)['rows']]"
}
for round in 1 2; do
    for m in q8b q9; do
        DELTALLM_LOG=debug $B bench -m /tmp/$m.gguf --device vulkan -p 512,2048 -n 0 -r 5 -o json \
            2>/tmp/err.txt | rates $m
        grep -E "recorded|opened" /tmp/err.txt | sed -E 's/.*of ([0-9]+) rows recorded in ([0-9.]+) ms/w\1:\2/; s/.*of ([0-9]+) positions opened in ([0-9.]+) ms/s\1:\2/' | tr '\n' ' '
        echo
    done
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
