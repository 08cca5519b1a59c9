#!/usr/bin/env bash
# The DeltaNet state's two copies in one buffer, chosen by the step's read and write offsets
# (push constants in the first run of this script, specialization constants in the second: the
# form of 2026-12-04-queued.patch), against the build before (BASE_BUILD): the token timed whole,
# its deltanet role and tg128; the same with the step in place (DLX_INPLACE=1: what the copies
# cost); `run` generating 512 tokens chosen on the device (queued passes) against the base (one
# pass at a time); the step's registers and code.
# Here:   BASE_BUILD=/tmp/base3 BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-04-queued.patch > 2026-12-04-queued.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08"
export ROLES="deltanet"
warm
for r in 1 2; do
    for m in q9 q08; do
        echo "round $r $m new  $(whole $m) | tg128 $(tgb $m) | run $(gen $m --temp 0)"
        echo "round $r $m inpl $(whole $m DLX_INPLACE=1) | tg128 $(tgb $m DLX_INPLACE=1) | run $(DLX_INPLACE=1 gen $m --temp 0)"
        echo "round $r $m base $(B=$P/deltallm.base whole $m) | tg128 $(B=$P/deltallm.base tgb $m) | run $(B=$P/deltallm.base gen $m --temp 0)"
    done
done
for b in $B $P/deltallm.base; do
    DELTALLM_LOG=info DELTALLM_VK_KERNEL_STATS=1 $b bench -m /tmp/q9.gguf --device vulkan -p 0 \
        -n 4 -r 1 2>&1 | grep -E "deltanet_step" | head -2
done
