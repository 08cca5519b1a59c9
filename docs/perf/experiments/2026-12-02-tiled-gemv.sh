#!/usr/bin/env bash
# The measurement of docs/PERF.md's entry "2026-12-02 (afternoon)": the tiled Q4_K GEMV
# (shaders/gemv_tile.comp) beside the launcher's over the same bytes (GemvSpeed.Tile), and the
# registers the compiler gave each (DELTALLM_VK_KERNEL_STATS).
# Device: one call carrying .gl and .devrun that runs this script.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
DELTALLM_VK_SPEED=1 DELTALLM_VK_KERNEL_STATS=1 timeout 300 $T --gtest_brief=1 \
    --gtest_filter='GemvSpeed.Tile' 2>&1 | grep -E 'GEMV|kernel gemv|FAIL|rror' | head -80
