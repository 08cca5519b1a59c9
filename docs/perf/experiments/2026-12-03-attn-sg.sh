#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-03 (17:40)" for the decode attention's heads'
# sums of squares through subgroup sums (attn_decode_sg, 2026-12-03-attn-sg.patch, not kept): this build against the one before it
# (BASE_BUILD), the code size the driver's compiler reports, the decode profiles and tg128 in
# alternating rounds (this build first), the attention alone (this build), and the attention tests under the
# Khronos validation layer.
# Here:   (build the base into dir/deltallm and dir/tests/test_vulkan)
#         git show 53ff2ba:docs/perf/experiments/2026-12-03-attn-sg.patch | git apply; (cd build-vk && ninja)
#         BASE_BUILD=dir BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-attn-sg.patch > 2026-12-03-attn-sg.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
B0=$P/deltallm.base
synth "qwen35 9b q9" "qwen3 8b q8"
for m in q9 q8; do
    DELTALLM_LOG=info DELTALLM_VK_KERNEL_STATS=1 DELTALLM_PIPELINE_CACHE= $B bench -m /tmp/$m.gguf \
        --device vulkan -p 0 -n 4 -r 1 2>&1 | grep 'kernel ' | grep attn_decode | sort -u
done
for m in q9 q8; do
    for r in 1 2; do
        for b in $B $B0; do
            echo "$m $(basename $b) round $r: $(B=$b prof $m | grep -o 'tokens, [0-9.]* us a token\|attention [0-9.]* ms [0-9.]*% [0-9.]* us/token' | tr '\n' ' ')"
        done
    done
    echo "tg128 $m new: $(tgb $m) base: $(B=$B0 tgb $m)"
done
DELTALLM_VK_SPEED=1 $T --gtest_filter='DecodeAttentionSpeed.Report' 2>&1 | grep "decode attention"
DELTALLM_VK_TEST_ROBUST=0 PARTS=suite FILTER='*Attention*' bash scripts/vk/device_reports.sh run 2>&1 | tail -4
