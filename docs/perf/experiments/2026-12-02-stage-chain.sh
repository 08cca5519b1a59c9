#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-02 (morning)": StageSpeed.Report and
# StageSpeed.Chain twice, then StageSpeed.Chain on a test binary built with
# 2026-12-02-stage-chain-nowait.patch (the handoff's wait left out), which must fail.
#
# Here:   BUILD_DIR=build-vk bash scripts/build.sh
#         git show 53ff2ba:docs/perf/experiments/2026-12-02-stage-chain-nowait.patch | git apply
#         (cd build-vk && ninja) && strip -o .devrun/test_vulkan_nowait build-vk/tests/test_vulkan
#         git show 53ff2ba:docs/perf/experiments/2026-12-02-stage-chain-nowait.patch | git apply -R
#         (cd build-vk && ninja) && BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-stage-chain-nowait.patch > 2026-12-02-stage-chain-nowait.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
for i in 1 2; do
    DELTALLM_VK_SPEED=1 $T --gtest_brief=1 --gtest_filter='StageSpeed.Chain:StageSpeed.Report' 2>&1 |
        grep -v "^\["
done
echo "== the wait left out (must fail)"
DELTALLM_VK_SPEED=1 .devrun/test_vulkan_nowait --gtest_brief=1 --gtest_filter='StageSpeed.Chain' 2>&1 |
    tail -8
