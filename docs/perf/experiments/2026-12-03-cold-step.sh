#!/usr/bin/env bash
# The DeltaNet decode step's cost cold (DeltaNetStepSpeed.AfterOtherWork, beside the decode
# attention's), its machine code's size, and the 9B's decode profile, on the packed binaries of
# `scripts/vk/device_reports.sh prepare`.
# Device: one call carrying .gl and .devrun that runs this script.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9"
DELTALLM_VK_SPEED=1 $T --gtest_filter='DeltaNetStepSpeed.*:DecodeAttentionSpeed.AfterOtherWork' 2>&1 |
    grep -E "us \(a timestamp|FAIL|OK \]"
DELTALLM_LOG=info DELTALLM_VK_KERNEL_STATS=1 DELTALLM_PIPELINE_CACHE= $B bench -m /tmp/q9.gguf \
    --device vulkan -p 0 -n 4 -r 1 2>&1 | grep 'kernel ' | sort -u
for r in 1 2; do echo "profile: $(prof q9)"; done
