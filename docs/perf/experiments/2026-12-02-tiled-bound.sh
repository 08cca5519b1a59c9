#!/usr/bin/env bash
# The measurement of docs/perf/history.md's entry "2026-12-02 (afternoon)", second table: the token
# command with every Q4_K / Q6_K GEMV of whole tiles replaced by the tiled GEMV reading the
# weights as if tiled (results wrong: a bound of what tiled weights would give the token), on a
# build of dfc310a with 2026-12-02-tiled-bound.patch applied (DLX_TILED=threads, DLX_TILE=rows).
# Device: one call carrying .gl and .devrun that runs this script, after the speed report of
# 2026-12-02-tiled-gemv.sh.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-tiled-bound.patch > 2026-12-02-tiled-bound.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen3 8b q8" "qwen35 0.8b q08"
prof() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A14 "profile, decode" | grep -E "decode|gemv|head|deltanet|attention" | sed 's/  */ /g' | tr '\n' ' '; }
for m in q9 q8 q08; do
    for v in 0 256 512; do echo "[$m] tiled $v: $(prof $m DLX_TILED=$v)"; done
done
tgb() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '; }
for m in q9 q8 q08; do
    echo "[$m] tg128 tiled 0 / 256 / 512: $(tgb $m DLX_TILED=0) / $(tgb $m DLX_TILED=256) / $(tgb $m DLX_TILED=512)"
done
