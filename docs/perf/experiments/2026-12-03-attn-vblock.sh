#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-03 (17:40)" for the decode attention's value
# rows taken in a block a thread (their weights four a vec4, rows past the live ones zeroed
# rather than branched on) and the first chunk's keys requested by the loop's own loads: this
# build against the one before it (BASE_BUILD), the code size the driver's compiler reports, the
# decode profiles and tg128 in alternating rounds (this build first), the attention alone at long
# contexts, and the attention and driver tests under the Khronos validation layer.
# Here:   (build the base into dir/deltallm and dir/tests/test_vulkan)
#         BASE_BUILD=dir BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
B0=$P/deltallm.base
T0=$P/test_vulkan.base
synth "qwen35 9b q9" "qwen3 8b q8" "qwen35 0.8b q08"
for b in $B $B0; do
    echo "== $(basename $b) kernels"
    for m in q9 q8; do
        DELTALLM_LOG=info DELTALLM_VK_KERNEL_STATS=1 DELTALLM_PIPELINE_CACHE= $b bench -m /tmp/$m.gguf \
            --device vulkan -p 0 -n 4 -r 1 2>&1 | grep 'kernel ' | grep attn_decode | sort -u
    done
done
for m in q9 q8; do
    for r in 1 2 3; do
        for b in $B $B0; do
            echo "$m $(basename $b) round $r: $(B=$b prof $m | grep -o 'tokens, [0-9.]* us a token\|attention [0-9.]* ms [0-9.]*% [0-9.]* us/token' | tr '\n' ' ')"
        done
    done
done
for m in q9 q8 q08; do
    for r in 1 2; do
        echo "tg128 $m new $r: $(tgb $m) base: $(B=$B0 tgb $m)"
    done
done
for t in $T $T0; do
    echo "== $(basename $t)"
    DELTALLM_VK_SPEED=1 $t --gtest_filter='DecodeAttentionSpeed.Report' 2>&1 | grep "decode attention"
done
DELTALLM_VK_TEST_ROBUST=0 PARTS=suite FILTER='*Attention*:VulkanDriver.*' bash scripts/vk/device_reports.sh run 2>&1 | tail -4
