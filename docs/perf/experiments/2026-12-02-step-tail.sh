#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-02 (night, later)": the DeltaNet step without
# its gated RMSNorm epilogue (DELTALLM_EXP_DN_TAIL=1: each column group stores its raw columns and
# leaves; results wrong), as the bound of moving that norm into the output projection. The code
# is 2026-12-02-step-tail.patch (against ebbe206).
#
# Here:   git show 53ff2ba:docs/perf/experiments/2026-12-02-step-tail.patch | git apply
#         BUILD_DIR=build-vk bash scripts/build.sh
#         BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-step-tail.patch > 2026-12-02-step-tail.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08"
prof() {
    $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 64 -r 2 --profile 2>&1 |
        grep -A14 "profile, decode" | grep -E "profile|deltanet|out " | sed "s/  */ /g"
}
for r in 1 2; do for m in q9 q08; do
    echo "[$m] tail: $(prof $m | tr '\n' ' ')"
    echo "[$m] no tail: $(DELTALLM_EXP_DN_TAIL=1 prof $m | tr '\n' ' ')"
done; done
for r in 1 2; do for m in q9 q08; do
    echo "[$m] tg tail $(tg $m) | no tail $(DELTALLM_EXP_DN_TAIL=1 tg $m)"
done; done
