#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-02 (night)": the plain Q4_K GEMV over x in
# bytes with a thread a Q4_K block (gemv.comp BLOCK_THREAD, Kernels::gemv_block_thread) beside
# the launcher's kernel in GemvSpeed.Rows, and the compiler's registers for both. Measured and
# not kept; the code is 2026-12-02-block-thread.patch (against 6857bd6).
#
# Here:   git show 53ff2ba:docs/perf/experiments/2026-12-02-block-thread.patch | git apply
#         BUILD_DIR=build-vk bash scripts/build.sh
#         BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-block-thread.patch > 2026-12-02-block-thread.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
DELTALLM_VK_SPEED=1 DELTALLM_VK_KERNEL_STATS=1 timeout 300 $T --gtest_filter=GemvSpeed.Rows > /tmp/rows.log 2>&1
grep -E "^GEMV q4_K" /tmp/rows.log | grep -v "wide off\|wide all" | sed 's/ (.*copies, [0-9]* runs//'
grep -E "Register Count" /tmp/rows.log | grep -E "gemv_q4_k_(bt_)?i8_sg" | sort -u
grep -E "FAILED|PASSED" /tmp/rows.log
