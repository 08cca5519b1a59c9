#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-03 (night)": the tiled GEMV's norm factor (XMODE 1 and 4) from
# subgroup sums in shared memory of their own, with no second barrier before the runs
# (2026-12-03-ss-own.patch, against a0f00a3; not kept):
# GemvSpeed.TokenForms (the FFN pair's XMODE 4 rows against XMODE 0), then the decode profile
# (a token timed whole every other token) and tg128 of the 9B and the 0.8B.
# Device: one call carrying .gl and .devrun on the packed binaries of
# `scripts/vk/device_reports.sh prepare` (built with the patch).
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-ss-own.patch > 2026-12-03-ss-own.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08"
DELTALLM_VK_SPEED=1 timeout 200 $T --gtest_brief=1 --gtest_filter='GemvSpeed.TokenForms' 2>&1 |
    grep -E "token form|PASSED|FAILED|Failure" | grep -v "5 GiB" | sed 's/  */ /g'
for r in 1 2; do
    for m in q9 q08; do
        echo "[$r] $m: $(prof $m DLX_NONE=1 | cut -c1-260)"
        echo "[$r] $m: tg128 $(tgb $m DLX_NONE=1)"
    done
done
