#!/usr/bin/env bash
# The decode attention with one query head a workgroup (DLX_ATTN_G=1, 2026-12-04-attn-g.patch)
# against two, the 9B's default: its code and registers, the speed reports (after other work, and
# by position), then the 9B's token timed whole with its attention role and tg128, alternating,
# and the 9B token command's stages with their pipelines (DELTALLM_VK_TRACE) into $OUT.
# Here:   BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-04-attn-g.patch > 2026-12-04-attn-g.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08"
for g in 2 1; do
    echo "== G=$g"
    DLX_ATTN_G=$g DELTALLM_LOG=info DELTALLM_VK_KERNEL_STATS=1 $B bench -m /tmp/q9.gguf --device vulkan \
        -p 0 -n 4 -r 1 2>&1 | grep -A3 "kernel attn_decode" | head -8
    DLX_ATTN_G=$g DELTALLM_VK_SPEED=1 $T --gtest_filter='DecodeAttentionSpeed.*' 2>&1 | grep "us"
done
export ROLES="attention"
$B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 64 -r 2 >/dev/null 2>&1
for r in 1 2; do
    for g in 2 1; do
        echo "round $r 9B [G=$g] $(whole q9 DLX_ATTN_G=$g) | tg128 $(tgb q9 DLX_ATTN_G=$g)"
    done
done
for g in 2 1; do
    echo "0.8B [G=$g] $(whole q08 DLX_ATTN_G=$g) | tg128 $(tgb q08 DLX_ATTN_G=$g)"
done
DELTALLM_VK_TRACE=1 $B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 1 -r 1 >$OUT/trace9.txt 2>&1
DELTALLM_LOG=info DELTALLM_VK_KERNEL_STATS=1 $B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 1 -r 1 \
    >$OUT/stats9.txt 2>&1
wc -l $OUT/*.txt
