#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-02 (late evening)": the DeltaNet step's output rounded by the step for
# the tiled output projection (DELTALLM_VK_GATED_ROUNDED=1, the default) against the
# projection's workgroups rounding it (0): the kernel and decode tests under the Khronos
# validation layer, the decode profile and tg128. Device: one call carrying .gl and .devrun on
# the packed binaries of `scripts/vk/device_reports.sh prepare`; OUT receives the suite's log.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08"
DELTALLM_VK_TEST_ROBUST=0 PARTS=suite OUT=${OUT:-/tmp} \
    FILTER='*DeltaNet*:*Gated*:*GemvTile*:*GemvXPaths*:*Decode*:*Driver*:SpirvShared*' \
    timeout 240 bash scripts/vk/device_reports.sh run 2>&1 | grep -E "suite rc|validation messages|PASSED|FAILED"
prof() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A14 "profile, decode" | grep -E "decode|gemv|head|deltanet|attention" | sed 's/  */ /g' | tr '\n' ' '; }
tgb() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '; }
for m in q9 q08; do
    for c in 1 0 1 0; do echo "[$m] rounded $c: $(prof $m DELTALLM_VK_GATED_ROUNDED=$c)"; done
done
for m in q9 q08; do
    for c in 1 0 1 0; do echo "[$m] tg128 rounded $c: $(tgb $m DELTALLM_VK_GATED_ROUNDED=$c)"; done
done
