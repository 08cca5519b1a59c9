#!/usr/bin/env bash
# The full comparison at 09d8eac (a prefill window's command queued in parts while it is recorded)
# against llama.cpp's Vulkan build on the same files, in one device call.
# Here:   BUILD_DIR=build-vk bash scripts/bench/device_bench.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
cd "$(dirname "$0")/../../.."
MODELS="qwen35:9b:q4_k_m qwen35:0.8b:q4_k_m qwen3:8b:q4_k_m" SWEEP=0 bash scripts/bench/device_bench.sh run 2>&1 |
    grep -E "^\||floor|rror" | head -40
