#!/usr/bin/env bash
# The DeltaNet decode step's column groups again (DELTALLM_VK_DN_COLUMNS 32, the default, against
# 16 and 64) now that its conv's inputs are requested at once: the 9B's token timed whole with its
# deltanet role, and tg128, alternating; the 0.8B's. Then the full comparison against llama.cpp's
# Vulkan build on the 9B, 0.8B and Qwen3-8B Q4_K_M files.
# Here:   BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
#         BUILD_DIR=build-vk bash scripts/bench/device_bench.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08"
export ROLES="deltanet"
$B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 64 -r 2 >/dev/null 2>&1
for r in 1 2; do
    for c in 16 32 64; do
        echo "round $r 9B [DN_COLUMNS=$c] $(whole q9 DELTALLM_VK_DN_COLUMNS=$c) | tg128 $(tgb q9 DELTALLM_VK_DN_COLUMNS=$c)"
    done
done
for c in 16 32 64; do
    echo "0.8B [DN_COLUMNS=$c] $(whole q08 DELTALLM_VK_DN_COLUMNS=$c) | tg128 $(tgb q08 DELTALLM_VK_DN_COLUMNS=$c)"
done
MODELS="qwen35:9b:q4_k_m qwen35:0.8b:q4_k_m qwen3:8b:q4_k_m" SWEEP=0 bash scripts/bench/device_bench.sh run 2>&1 |
    grep -E "^\|" | head -40
