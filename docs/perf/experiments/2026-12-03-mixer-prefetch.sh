#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-03 (21:00)", second call: against the build of
# 960837e (BASE_BUILD, packed as deltallm.base), this build had
# - the DeltaNet decode step's norm weight requested with its other inputs (measured, not kept);
# - a mixer's output projection read into the L2 by the streaming probe's kernel in the mixer's
#   own stage, after it (DLX_PF bit 1: the DeltaNet step's, bit 2: the attention's; DLX_PF_GRID
#   caps the reading workgroups): 2026-12-03-mixer-prefetch.patch, not in the tree.
# Alternating rounds, this build first: the 9B's token timed whole (bench --profile) with its out,
# deltanet and attention roles, and tg128; then the 0.8B and Qwen3-8B.
# Here:   git show 53ff2ba:docs/perf/experiments/2026-12-03-mixer-prefetch.patch | git apply
#         (cd build-vk && ninja) && BASE_BUILD=... BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-mixer-prefetch.patch > 2026-12-03-mixer-prefetch.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08" "qwen3 8b q8"
export ROLES="deltanet|attention|gemv out"
for bin in $T $P/test_vulkan.base; do
    DELTALLM_VK_SPEED=1 $bin --gtest_filter='DeltaNetStepSpeed.*' 2>&1 | grep "us (a"
done
$B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 64 -r 2 >/dev/null 2>&1
run() {  # LABEL MODEL CFG...
    local label=$1 m=$2
    shift 2
    if [ "$1" = base ]; then
        echo "$label [base] $(B=$P/deltallm.base whole $m) | tg128 $(B=$P/deltallm.base tgb $m)"
    else
        echo "$label [$*] $(whole $m "$@") | tg128 $(tgb $m "$@")"
    fi
}
for r in 1 2; do
    run "round $r 9B" q9 DLX_PF=0
    run "round $r 9B" q9 base
    run "round $r 9B" q9 DLX_PF=1
    run "round $r 9B" q9 DLX_PF=3
    run "round $r 9B" q9 DLX_PF=3 DLX_PF_GRID=132
    run "round $r 9B" q9 DLX_PF=3 DLX_PF_GRID=264
done
for m in q08 q8; do
    run "$m" $m DLX_PF=0
    run "$m" $m base
    run "$m" $m DLX_PF=3
    run "$m" $m DLX_PF=3 DLX_PF_GRID=132
done
