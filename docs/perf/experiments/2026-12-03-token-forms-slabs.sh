#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-03 (evening)", the second call: GemvSpeed.TokenForms with every matrix's
# copies back to back in slabs of 1 GiB (as the weight arena holds them), over 512 MiB of copies
# and over 5 GiB (a 9B's weights): whether the stages' cost in the token beyond the report comes
# from how far the token's reads range. Device: one call carrying .gl and .devrun on the packed
# binaries of `scripts/vk/device_reports.sh prepare`.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
DELTALLM_VK_SPEED=1 $T --gtest_brief=1 --gtest_filter='GemvSpeed.TokenForms' 2>&1 |
    grep -E "token form|PASSED|FAILED|Failure|row " | sed 's/  */ /g'
