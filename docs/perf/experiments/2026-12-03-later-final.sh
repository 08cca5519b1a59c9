#!/usr/bin/env bash
# The last measurement of docs/perf/history.md's entry "2026-12-03 (later)": the tree as committed (the
# attention's output rounded by the attention, the DeltaNet step's state requested first) under
# the Khronos validation layer (the attention, DeltaNet, decode fusion, GEMV path and driver
# tests), its greedy tokens, decode profile and tg128.
# Device: one call carrying .gl and .devrun that runs this script on the packed binaries of
# `scripts/vk/device_reports.sh prepare`; OUT receives the logs.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen3 8b q3" "qwen35 0.8b q08"
DELTALLM_VK_TEST_ROBUST=0 PARTS=suite OUT=${OUT:-/tmp} \
    FILTER='*Attention*:*DeltaNet*:*DecodeFusion*:*GemvXPaths*:*VulkanDriver.*:SpirvShared*' \
    timeout 200 bash scripts/vk/device_reports.sh run 2>&1 | grep -E "suite rc|validation messages|PASSED|FAILED"
echo "[q9] greedy: $($B run -m /tmp/q9.gguf --device vulkan -p 'The quick brown fox' -n 24 --temp 0 2>/dev/null | od -An -tx1 | md5sum)"
for m in q9 q3 q08; do echo "[$m] $(prof $m)"; done
for m in q9 q3; do echo "[$m] tg128: $(tgb $m)"; done
