#!/usr/bin/env bash
# The wait for a submitted command on a timeline semaphore (DELTALLM_VK_TIMELINE=1, the default
# of this build) against a fence reset after each wait (=0): tg128 on the 9B, the 0.8B and
# Qwen3-8B, three alternating rounds, the timeline first.
# Here:   BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08" "qwen3 8b q8b"
$B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 64 -r 2 >/dev/null 2>&1
for r in 1 2 3; do
    for m in q9 q08 q8b; do
        for tl in 1 0; do
            echo "round $r $m [TIMELINE=$tl] tg128 $(tgb $m DELTALLM_VK_TIMELINE=$tl)"
        done
    done
done
