#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-03": the tiled GEMVs that add to h (output and down projections) in one
# workgroup of 16 slots a tile instead of two parts of 8 slots (2026-12-03-slots16.patch,
# DLX_SLOTS16 bit 1: the output projections, 16 runs a row; bit 2: the down projections).
# Greedy tokens, profile and tg128. Device: one call carrying .gl and .devrun on the packed
# binaries of `scripts/vk/device_reports.sh prepare` (built with the patch).
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-slots16.patch > 2026-12-03-slots16.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08" "qwen3 8b q3"
prof() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A16 "profile, decode" | grep -E "decode|gemv|head|deltanet|attention" | sed 's/  */ /g' | tr '\n' ' '; }
tgb() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '; }
for c in DLX_SLOTS16=0 DLX_SLOTS16=3; do
    env $c DELTALLM_VK_KERNEL_STATS=1 $B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 4 -r 1 2>&1 | grep "kernel gemv_tile" | sed "s/^/[$c] /" | cut -c1-200 | sort -u
    for m in q9 q3; do echo "[$m] $c greedy: $(env $c $B run -m /tmp/$m.gguf --device vulkan -p 'The quick brown fox' -n 24 --temp 0 2>/dev/null | od -An -tx1 | md5sum)"; done
done
for m in ${MODELS:-q9 q3}; do
    for c in ${CASES:-DLX_SLOTS16=0 DLX_SLOTS16=1 DLX_SLOTS16=2 DLX_SLOTS16=3 DLX_SLOTS16=0 DLX_SLOTS16=1}; do
        echo "[$m] $c: $(prof $m "$c")"
    done
done
for r in 1 2; do
    for m in ${MODELS:-q9 q3}; do
        for c in ${TGCASES:-DLX_SLOTS16=0 DLX_SLOTS16=1 DLX_SLOTS16=3}; do echo "[$m] tg128 $c: $(tgb $m "$c")"; done
    done
done
