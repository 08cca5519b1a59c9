#!/usr/bin/env bash
# The attention layers' output projection in the DeltaNet layers' form (b8be91f) against the
# build before it (BASE_BUILD), the new build first in each round: the token timed whole with its
# gemv out and attention roles, and tg128, on the 9B, the 0.8B and Qwen3-8B (no DeltaNet layers:
# nothing changes). Then the decode attention experiments of 2026-12-04-attn-dual.patch on the
# new build: one query head a workgroup (DLX_ATTN_G=1) and the attention recorded twice
# (DLX_ATTN_DUAL=8: G=1 up to 8 chunks, the default past them; DLX_ATTN_DUAL_ORDER: the default
# recorded first). Last, the decode fusion and driver tests under the Khronos validation layer.
# Here:   BASE_BUILD=/tmp/base1 BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-04-attn-dual.patch > 2026-12-04-attn-dual.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08" "qwen3 8b q8b"
export ROLES="attention|out"
vs_base q9 q08 q8b
for r in 1 2; do
    for m in q9 q08; do
        for c in "X=0" "DLX_ATTN_G=1" "DLX_ATTN_DUAL=8"; do
            echo "round $r $m [$c] $(whole $m $c) | tg128 $(tgb $m $c)"
        done
    done
done
DELTALLM_VK_TEST_ROBUST=0 PARTS=suite FILTER='VulkanDecodeFusion.*:VulkanDriver.*' \
    bash scripts/vk/device_reports.sh run 2>&1 | tail -4
