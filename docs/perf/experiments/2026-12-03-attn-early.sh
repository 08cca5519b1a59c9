#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-03 (15:00)": the decode attention requests what its preparation and
# output read (the raw query and key heads, their norm weights, the rotary frequencies, the value
# row, the gates) before it waits on any of them (6133a41). The first call ran a first form that
# also requested the first chunk's keys and values first (2026-12-03-attn-chunk-early.patch,
# against 6133a41; not kept).
# Against the build before (e3463e3), packed as the base:
#   BASE_BUILD=<build of e3463e3> BUILD_DIR=build-vk scripts/vk/device_reports.sh prepare
# Two alternating rounds of the decode profile (a token timed whole every other token) and tg128
# on the 9B, the 0.8B and Qwen3-8B; then tg128 at a depth of 4096 on the 9B and Qwen3-8B.
# Device: one call carrying .gl and .devrun.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-attn-chunk-early.patch > 2026-12-03-attn-chunk-early.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08" "qwen3 8b q3"
B1=$B
B0=$P/deltallm.base
for r in 1 2; do
    for m in q9 q08 q3; do
        for b in $B0 $B1; do
            B=$b
            l=$(prof $m DLX_NONE=1)
            echo "[$r] $m ${b##*/}: $(echo "$l" | grep -o "whole, [^:]*: [0-9]* tokens, [0-9.]* us" | head -1)," \
                "$(echo "$l" | grep -o "attention *[0-9.]* ms *[0-9.]*% *[0-9.]* us/token" | head -1)"
            echo "[$r] $m ${b##*/}: tg128 $(tgb $m DLX_NONE=1)"
        done
    done
done
for b in $B0 $B1; do
    echo "${b##*/}: $(DELTALLM_VK_KERNEL_STATS=1 DELTALLM_LOG=info $b bench -m /tmp/q9.gguf --device vulkan -p 0 -n 4 -r 1 2>&1 | grep -i "attn_decode" | sort -u | head -3)"
done
for m in q9 q3; do
    for b in $B0 $B1; do
        echo "$m ${b##*/}: tg128 @ d4096 $($b bench -m /tmp/$m.gguf --device vulkan -p 0 -n 128 -d 4096 -r 2 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' ')"
    done
done
