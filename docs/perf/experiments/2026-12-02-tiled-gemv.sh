#!/usr/bin/env bash
# The measurement of docs/perf/history.md's entry "2026-12-02 (afternoon)": the tiled GEMV
# (shaders/gemv_tile.comp) beside the launcher's over the same bytes (GemvSpeed.Tile), and the
# registers the compiler gave each (DELTALLM_VK_KERNEL_STATS). The whole report goes to
# $OUT/tile.txt.
# Device: one call carrying .gl and .devrun that runs this script.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
DELTALLM_VK_SPEED=1 DELTALLM_VK_KERNEL_STATS=1 timeout 300 $T --gtest_brief=1 \
    --gtest_filter='GemvSpeed.Tile' > ${OUT:-/tmp}/tile.txt 2>&1
grep -E '^GEMV' ${OUT:-/tmp}/tile.txt | sed 's/ MB, /|/; s/ us, /|/' | awk -F'|' '{print $1" | "$2" us"}' | sed 's/: [0-9.]* | / | /'
grep -E 'FAIL|rror' ${OUT:-/tmp}/tile.txt | head -5
