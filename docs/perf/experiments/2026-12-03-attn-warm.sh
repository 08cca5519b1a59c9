#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-03 (17:40)": the decode attention's
# pipeline run as a warm-up over buffers of its own (position 0, one split, the grid of its
# head groups) at the start of a stage before each attention layer, to keep its code in the
# device's L2 between attention layers (DLX_WARM, 2026-12-03-attn-warm.patch, not in the tree):
#   1  first in the FFN pair's stage of every DeltaNet layer
#   2  first in the FFN pair's stage of the DeltaNet layer before each attention layer
#   3  first in the input projections' stage of each attention layer
#   4  first in the down projection's stage of every DeltaNet layer
# Here:   git show 53ff2ba:docs/perf/experiments/2026-12-03-attn-warm.patch | git apply
#         (cd build-vk && ninja) && BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-attn-warm.patch > 2026-12-03-attn-warm.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08"
$B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 64 -r 2 >/dev/null 2>&1
for r in 1 2; do
    for m in 0 1 2 3 4; do
        echo "q9 warm $m: $(prof q9 DLX_WARM=$m)"
    done
done
for m in 0 1 2 3 4; do
    echo "tg128 q9 warm $m: $(tgb q9 DLX_WARM=$m)"
    echo "tg128 q08 warm $m: $(tgb q08 DLX_WARM=$m)"
done
