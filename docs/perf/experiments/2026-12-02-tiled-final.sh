#!/usr/bin/env bash
# The last measurement of docs/perf/history.md's entry "2026-12-02 (evening)": the kept form (every
# Q4_K / Q6_K decode GEMV on the tiled GEMV, the down projections split over workgroups, h
# rounded by its writers over 2048+ values) under the Khronos validation layer, and its decode
# profile and tg128. Device: one call carrying .gl and .devrun that runs this script on the
# packed binaries of `scripts/vk/device_reports.sh prepare`; OUT receives the logs.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen3 8b q8" "qwen35 0.8b q08"
DELTALLM_VK_TEST_ROBUST=0 PARTS=suite OUT=${OUT:-/tmp} \
    FILTER='*GemvTile*:*GemvXPaths*:*GemvSwiglu*:*GemvRound*:*Decode*:*Driver*:*GemmTiles*:*GetRows*' \
    timeout 300 bash scripts/vk/device_reports.sh run 2>&1 | grep -E "suite rc|validation messages|PASSED|FAILED"
prof() { $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A14 "profile, decode" | grep -E "decode|gemv|head|deltanet|attention" | sed 's/  */ /g' | tr '\n' ' '; }
for m in q9 q8 q08; do echo "[$m] $(prof $m)"; done
for m in q9 q8 q08; do echo "[$m] tg128: $(tg $m)"; done
