#!/usr/bin/env bash
# The decode attention's pipeline run as a warm-up beside the DeltaNet step of the layer before
# each attention layer, where the memory is nearly idle (DLX_WARM=8: dispatched before the step,
# 6: after it), against none (0) and the best placement of 2026-12-03 (17:40), the attention
# layer's own input projections (3): 2026-12-03-attn-warm-step.patch (2026-12-03-attn-warm.patch
# with the two placements added), not in the tree. Alternating rounds: the 9B's token timed whole
# (bench --profile) with its deltanet and attention roles, and tg128; the 0.8B's.
# Here:   git show 53ff2ba:docs/perf/experiments/2026-12-03-attn-warm-step.patch | git apply
#         (cd build-vk && ninja) && BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-attn-warm.patch > 2026-12-03-attn-warm.patch
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-attn-warm-step.patch > 2026-12-03-attn-warm-step.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08"
export ROLES="deltanet|attention|gemv in"
$B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 64 -r 2 >/dev/null 2>&1
for r in 1 2; do
    for w in 8 0 6 3; do
        echo "round $r 9B [DLX_WARM=$w] $(whole q9 DLX_WARM=$w) | tg128 $(tgb q9 DLX_WARM=$w)"
    done
done
for w in 8 0 6; do
    echo "0.8B [DLX_WARM=$w] $(whole q08 DLX_WARM=$w) | tg128 $(tgb q08 DLX_WARM=$w)"
done
