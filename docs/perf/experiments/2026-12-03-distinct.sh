#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-03 (night)": GemvSpeed.TokenForms (with the warm-up of a47c17e) as it
# is, then with every row of every matrix its own random weights (2026-12-03-only-roles.patch,
# DLX_DISTINCT=1; the report's checks then skipped) instead of 64 distinct rows repeated: whether
# the weights' bytes themselves set a stage's pace. Device: as 2026-12-03-only-roles.sh, after it.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-only-roles.patch > 2026-12-03-only-roles.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
for c in DLX_NONE=1 DLX_DISTINCT=1; do
    env $c DELTALLM_VK_SPEED=1 $T --gtest_brief=1 --gtest_filter='GemvSpeed.TokenForms' 2>&1 |
        grep -E "token form|PASSED|FAILED|Failure|row " | sed 's/  */ /g' | sed "s/^/$c /"
done
