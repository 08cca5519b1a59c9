#!/usr/bin/env bash
# The measurement of docs/perf/history.md's entry "2026-12-02 (afternoon)", last table: the speed report
# with the long rows' tiles of 8 (a slot a run), and the token's bound of
# 2026-12-02-tiled-bound.sh with DLX_LONG=1 (rows of 8192+ values in tiles of 8) on a build of
# 31178ce (and this entry's test and kernel change) with
# 2026-12-02-tiled-long.patch applied (the bound's patch and DLX_LONG; not in the tree).
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-tiled-bound.patch > 2026-12-02-tiled-bound.patch
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-tiled-long.patch > 2026-12-02-tiled-long.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
DELTALLM_VK_SPEED=1 timeout 300 $T --gtest_brief=1 --gtest_filter='GemvSpeed.Tile' > ${OUT:-/tmp}/tile.txt 2>&1
grep -E '^GEMV .* x 12288' ${OUT:-/tmp}/tile.txt | sed 's/ MB, /|/' | cut -c1-100
grep -E 'FAIL|rror' ${OUT:-/tmp}/tile.txt | head -5
synth "qwen35 9b q9" "qwen3 8b q8" "qwen35 0.8b q08"
prof() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A14 "profile, decode" | grep -E "decode|gemv|head|deltanet|attention" | sed 's/  */ /g' | tr '\n' ' '; }
for m in q9 q8 q08; do
    echo "[$m] as is: $(prof $m)"
    echo "[$m] tiled 256, long in 8: $(prof $m 'DLX_TILED=256 DLX_LONG=1')"
done
tgb() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '; }
for m in q9 q8 q08; do
    echo "[$m] tg128 as is / tiled 256, long in 8: $(tgb $m) / $(tgb $m 'DLX_TILED=256 DLX_LONG=1')"
done
