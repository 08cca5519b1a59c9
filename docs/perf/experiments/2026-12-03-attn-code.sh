#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-03 (17:40)": the decode attention's value
# rows a step (DLX_VSTEP: that many rows a step in the loop, not all of a chunk's rows loaded
# before the scores; 2026-12-03-attn-code.patch, not in the tree) against its code size, its
# time right after itself and after other work (DecodeAttentionSpeed.AfterOtherWork) and in the
# 9B's token (the decode profile), and the machine code of the 9B's kernels as built.
# Here:   git show 53ff2ba:docs/perf/experiments/2026-12-03-attn-code.patch | git apply
#         (cd build-vk && ninja) && BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-attn-code.patch > 2026-12-03-attn-code.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9"
$B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 64 -r 2 >/dev/null 2>&1
for v in "" 16 8 4; do
    echo "== DLX_VSTEP=$v"
    if [ -n "$v" ]; then export DLX_VSTEP=$v; else unset DLX_VSTEP; fi
    DELTALLM_LOG=info DELTALLM_VK_KERNEL_STATS=1 DELTALLM_PIPELINE_CACHE= $B bench -m /tmp/q9.gguf \
        --device vulkan -p 0 -n 4 -r 1 2>&1 | grep 'kernel ' | grep attn_decode | sort -u
    DELTALLM_VK_SPEED=1 $T --gtest_filter='DecodeAttentionSpeed.AfterOtherWork' 2>&1 | grep "decode attention"
    for r in 1 2; do echo "profile: $(prof q9)"; done
done
unset DLX_VSTEP
PARTS=sass bash scripts/vk/device_reports.sh run >/dev/null 2>&1
ls $OUT
