#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-03 (21:00)", first call: against the build of
# 31ed8f4 (BASE_BUILD, packed as deltallm.base),
# - the DeltaNet decode step with its conv's inputs all requested before any store (960837e, in
#   the tree): DeltaNetStepSpeed.AfterOtherWork of both builds, the token's deltanet role;
# - the token command's stage barriers split in two (an event set after a stage, waited on before
#   the next stage's first dispatch: DLX_EV=1), and the first k blocks of every tile of the next
#   stage's first tiled GEMV read into the L2 between the two halves (DLX_EV_PF=k):
#   2026-12-03-split-prefetch.patch, not in the tree.
# Alternating rounds, this build first: the 9B's token timed whole (bench --profile) and tg128;
# the 0.8B's and Qwen3-8B's.
# Here:   git show 53ff2ba:docs/perf/experiments/2026-12-03-split-prefetch.patch | git apply
#         (cd build-vk && ninja) && BASE_BUILD=... BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-split-prefetch.patch > 2026-12-03-split-prefetch.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08" "qwen3 8b q8"
for bin in $T $P/test_vulkan.base; do
    DELTALLM_VK_SPEED=1 $bin --gtest_filter='DeltaNetStepSpeed.*' 2>&1 | grep "us (a"
done
$B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 64 -r 2 >/dev/null 2>&1
for r in 1 2; do
    for cfg in "DLX_EV=0" "base" "DLX_EV=1" "DLX_EV=1 DLX_EV_PF=2" "DLX_EV=1 DLX_EV_PF=4" "DLX_EV=1 DLX_EV_PF=8"; do
        if [ "$cfg" = base ]; then
            echo "round $r [base] 9B $(B=$P/deltallm.base whole q9) | tg128 $(B=$P/deltallm.base tgb q9)"
        else
            echo "round $r [$cfg] 9B $(whole q9 $cfg) | tg128 $(tgb q9 $cfg)"
        fi
    done
done
for cfg in "DLX_EV=0" "base" "DLX_EV=1 DLX_EV_PF=2" "DLX_EV=1 DLX_EV_PF=4"; do
    if [ "$cfg" = base ]; then
        echo "[base] 0.8B $(B=$P/deltallm.base whole q08) tg128 $(B=$P/deltallm.base tgb q08) | Qwen3-8B $(B=$P/deltallm.base whole q8) tg128 $(B=$P/deltallm.base tgb q8)"
    else
        echo "[$cfg] 0.8B $(whole q08 $cfg) tg128 $(tgb q08 $cfg) | Qwen3-8B $(whole q8 $cfg) tg128 $(tgb q8 $cfg)"
    fi
done
