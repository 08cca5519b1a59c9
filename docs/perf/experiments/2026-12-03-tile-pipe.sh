#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-03": the tiled GEMV holding its next run's loads in flight while it
# computes one (2026-12-03-tile-pipe.patch, DLX_TILE_PIPE=1), and the repeat of the L2 prefetch's
# tg128 (2026-12-03-l2-prefetch.patch, DLX_PF=1). Profile and tg128; the kernels' statistics
# (registers) of both forms. Device: one call carrying .gl and .devrun on the packed binaries of
# `scripts/vk/device_reports.sh prepare` (built with both patches).
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-l2-prefetch.patch > 2026-12-03-l2-prefetch.patch
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-tile-pipe.patch > 2026-12-03-tile-pipe.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08" "qwen3 8b q3"
prof() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A16 "profile, decode" | grep -E "decode|gemv|head|deltanet|attention" | sed 's/  */ /g' | tr '\n' ' '; }
tgb() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '; }
for c in DLX_TILE_PIPE=0 DLX_TILE_PIPE=1; do
    env $c DELTALLM_VK_KERNEL_STATS=1 $B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 4 -r 1 2>&1 | grep "kernel gemv_tile" | sed "s/^/[$c] /" | cut -c1-400
done
for m in ${MODELS:-q9 q3 q08}; do
    for c in ${CASES:-DLX_TILE_PIPE=0 DLX_TILE_PIPE=1 DLX_TILE_PIPE=0 DLX_TILE_PIPE=1}; do
        echo "[$m] $c: $(prof $m "$c")"
    done
done
for r in 1 2; do
    for m in ${MODELS:-q9 q3 q08}; do
        for c in ${TGCASES:-DLX_TILE_PIPE=0 DLX_TILE_PIPE=1 DLX_PF=1}; do echo "[$m] tg128 $c: $(tgb $m "$c")"; done
    done
done
