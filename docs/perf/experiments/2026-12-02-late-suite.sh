#!/usr/bin/env bash
# The whole Vulkan test suite at the head of docs/perf/history.md's entry "2026-12-02 (late evening)"
# (every test, every variant the H200 offers) under the Khronos validation layer, devices opened
# as the engine opens them. Device: one call carrying .gl and .devrun on the packed binaries of
# `scripts/vk/device_reports.sh prepare`; OUT receives validation.log.
cd "$(dirname "$0")/../../.."
DELTALLM_VK_TEST_ROBUST=0 PARTS=suite OUT=${OUT:-/tmp} bash scripts/vk/device_reports.sh run 2>&1 |
    grep -E "suite rc|validation messages|tests ran|PASSED|FAILED|SKIPPED"
