#!/usr/bin/env bash
# The measurement of docs/PERF.md's entry "2026-12-02 (afternoon)", long rows split: the speed
# report's rows of 12288 values with each tile's runs over 2-4 workgroups (gemv_tile.comp
# KSPLIT), and the token's bound of 2026-12-02-tiled-bound.sh with DLX_SPLIT (the down
# projections so split), on a build with 2026-12-02-tiled-split.patch applied (the bound's patch
# and DLX_SPLIT; not in the tree) against a228fa5.
# Device: one call carrying .gl and .devrun that runs this script.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
DELTALLM_VK_SPEED=1 timeout 300 $T --gtest_brief=1 --gtest_filter='GemvSpeed.Tile' > ${OUT:-/tmp}/tile.txt 2>&1
grep -E '^GEMV .* x 12288' ${OUT:-/tmp}/tile.txt | grep -v norm | sed 's/ MB, /|/' | cut -c1-100
grep -E 'FAIL|rror' ${OUT:-/tmp}/tile.txt | head -5
synth "qwen35 9b q9" "qwen3 8b q8"
prof() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A14 "profile, decode" | grep -E "decode|gemv|head|deltanet|attention" | sed 's/  */ /g' | tr '\n' ' '; }
for m in q9 q8; do
    echo "[$m] as is: $(prof $m)"
    for k in 1 2 3 4; do echo "[$m] tiled 256, down split $k: $(prof $m "DLX_TILED=256 DLX_SPLIT=$k")"; done
done
tgb() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '; }
for m in q9 q8; do
    echo "[$m] tg128 as is / tiled 256 / down split 3: $(tgb $m) / $(tgb $m DLX_TILED=256) / $(tgb $m 'DLX_TILED=256 DLX_SPLIT=3')"
done
