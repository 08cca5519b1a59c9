#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-03 (17:40)" for the decode attention's
# value rows read at one stride from one address (the caches hold whole chunks), row pos taken
# from shared memory after the chunk's other rows: this build against the one before it
# (BASE_BUILD), the code size the driver's compiler reports, the decode profile and tg128 of
# three files in alternating rounds, the attention alone at long contexts, and the attention
# and driver tests under the Khronos validation layer.
# Here:   (build the base into dir/deltallm and dir/tests/test_vulkan)
#         BASE_BUILD=dir BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
B0=$P/deltallm.base
T0=$P/test_vulkan.base
synth "qwen35 9b q9" "qwen3 8b q8" "qwen35 0.8b q08"
for b in $B0 $B; do
    echo "== $(basename $b) kernels"
    DELTALLM_LOG=info DELTALLM_VK_KERNEL_STATS=1 DELTALLM_PIPELINE_CACHE= $b bench -m /tmp/q9.gguf \
        --device vulkan -p 0 -n 4 -r 1 2>&1 | grep 'kernel ' | grep attn_decode | sort -u
    DELTALLM_LOG=info DELTALLM_VK_KERNEL_STATS=1 DELTALLM_PIPELINE_CACHE= $b bench -m /tmp/q8.gguf \
        --device vulkan -p 0 -n 4 -r 1 2>&1 | grep 'kernel ' | grep attn_decode | sort -u
done
for m in q9 q8; do
    for r in 1 2; do
        for b in $B0 $B; do
            echo "$m $(basename $b) round $r: $(B=$b prof $m)"
        done
    done
done
for m in q9 q8 q08; do
    for r in 1 2; do
        echo "tg128 $m base $r: $(B=$B0 tgb $m) new: $(tgb $m)"
        [ $m = q08 ] && continue
        echo "tg128 $m @d4096 base $r: $($B0 bench -m /tmp/$m.gguf --device vulkan -p 0 -n 128 -d 4096 -r 2 2>&1 | grep tg128 | cut -d'|' -f8) new: $($B bench -m /tmp/$m.gguf --device vulkan -p 0 -n 128 -d 4096 -r 2 2>&1 | grep tg128 | cut -d'|' -f8)"
    done
done
for t in $T0 $T; do
    echo "== $(basename $t)"
    DELTALLM_VK_SPEED=1 $t --gtest_filter='DecodeAttentionSpeed.*' 2>&1 | grep "decode attention"
done
DELTALLM_VK_TEST_ROBUST=0 PARTS=suite FILTER='*Attention*:VulkanDriver.*' bash scripts/vk/device_reports.sh run 2>&1 | tail -8
