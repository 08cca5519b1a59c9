#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-03 (15:00)": the tiled GEMV requests the blocks' sums of squares of a
# normed rounding (XMODE 4) before its copy of x, not after it; decode hands out its logits where
# the head wrote them (host-cached memory) instead of copying them.
# Against the build before (2f3215c), packed as the base:
#   BASE_BUILD=<build of 2f3215c> BUILD_DIR=build-vk scripts/vk/device_reports.sh prepare
# Two alternating rounds of the decode profile (a token timed whole every other token), tg128,
# and `run` (256 greedy tokens chosen on the device; and with a repeat penalty, so the host
# samples from the logits) on the 9B, the 0.8B and Qwen3-8B; then GemvSpeed.TokenForms of both
# (the FFN pair's rows).
# Device: one call carrying .gl and .devrun.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08" "qwen3 8b q3"
B1=$B
B0=$P/deltallm.base
gen() {  # BINARY MODEL [run options]: decode rate of 256 tokens
    local b=$1 m=$2
    shift 2
    $b run -m /tmp/$m.gguf --device vulkan --prompt-ids 1 -n 256 --temp 0 --ignore-eos "$@" \
        2>&1 >/dev/null | grep -o "([0-9.]* tokens/s)"
}
for r in 1 2; do
    for m in q9 q08 q3; do
        for b in $B0 $B1; do
            B=$b
            echo "[$r] $m ${b##*/}: $(prof $m DLX_NONE=1 | cut -c1-420)"
            echo "[$r] $m ${b##*/}: tg128 $(tgb $m DLX_NONE=1) run $(gen $b $m) host-sampled $(gen $b $m --repeat-penalty 1.1)"
        done
    done
done
for tb in $P/test_vulkan.base $T; do
    echo "== ${tb##*/}"
    DELTALLM_VK_SPEED=1 timeout 200 $tb --gtest_brief=1 --gtest_filter='GemvSpeed.TokenForms' 2>&1 |
        grep -E "token form|PASSED|FAILED|Failure" | grep -v "5 GiB" | sed 's/  */ /g' | head -8
done
