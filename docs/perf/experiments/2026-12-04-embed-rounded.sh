#!/usr/bin/env bash
# The embedding row rounded for the first norm's readers by the row fetch (get_rows.comp
# ROUND_NORM), so the first layer's input projections read h in the same form and pipelines as
# every later layer's, against the build before it (BASE_BUILD), the new build first in each
# round: the token timed whole with its gemv in role, and tg128, on the 9B, the 0.8B and
# Qwen3-8B; the first stages of the 9B's token command (DELTALLM_VK_TRACE); greedy ids of both
# builds; the decode fusion and driver tests under the Khronos validation layer.
# Here:   BASE_BUILD=/tmp/base2 BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08" "qwen3 8b q8b"
export ROLES="gemv in"
vs_base q9 q08 q8b
DELTALLM_VK_TRACE=1 $B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 1 -r 1 2>&1 |
    grep -A2 "vk trace: embed" | head -3 | cut -c1-240
echo "9B greedy ids, 200 tokens (hashed): new / base"
for b in $B $P/deltallm.base; do
    $b run -m /tmp/q9.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 200 --temp 0 --print-ids 2>/dev/null | md5sum
done
DELTALLM_VK_TEST_ROBUST=0 PARTS=suite FILTER='VulkanDecodeFusion.*:VulkanDriver.*' \
    bash scripts/vk/device_reports.sh run 2>&1 | tail -3
