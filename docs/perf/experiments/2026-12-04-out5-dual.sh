#!/usr/bin/env bash
# Two experiments (2026-12-04-out5-dual.patch): the attention layers' output projection on the
# DeltaNet layers' output projection pipeline (XMODE 5 with no gated norm factor, DLX_OUT5=cols),
# so its code is warm; and the decode attention recorded twice, one query head a workgroup for
# contexts of up to DLX_ATTN_DUAL chunks and the default head groups past them. The 9B's token
# timed whole with its attention and gemv out roles and tg128, alternating; the speed reports
# with each DUAL; Qwen3-8B and the 0.8B.
# Here:   BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-04-out5-dual.patch > 2026-12-04-out5-dual.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08" "qwen3 8b q8b"
for d in 0 2 8 16; do
    echo "== DUAL=$d"
    DLX_ATTN_DUAL=$d DELTALLM_VK_SPEED=1 $T --gtest_filter='DecodeAttentionSpeed.*' 2>&1 | grep "us"
done
export ROLES="attention|out"
$B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 64 -r 2 >/dev/null 2>&1
cfgs=("X=0" "DLX_OUT5=4096" "DLX_ATTN_DUAL=2" "DLX_ATTN_DUAL=8" "DLX_OUT5=4096 DLX_ATTN_DUAL=8")
for r in 1 2; do
    for c in "${cfgs[@]}"; do
        echo "round $r 9B [$c] $(whole q9 $c) | tg128 $(tgb q9 $c)"
    done
done
for c in "X=0" "DLX_ATTN_DUAL=2" "DLX_ATTN_DUAL=8"; do
    echo "Qwen3-8B [$c] $(whole q8b $c) | tg128 $(tgb q8b $c)"
    echo "0.8B [$c] $(whole q08 $c) | tg128 $(tgb q08 $c)"
done
echo "9B greedy, 200 tokens (ids hashed): base / OUT5 / DUAL=8"
for c in "X=0" "DLX_OUT5=4096" "DLX_ATTN_DUAL=8"; do
    env $c $B run -m /tmp/q9.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 200 --temp 0 --print-ids 2>/dev/null | md5sum
done
