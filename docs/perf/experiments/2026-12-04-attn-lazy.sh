#!/usr/bin/env bash
# A session's token commands recorded for one attention form at a time (DLX_LAZY=1,
# `2026-12-04-attn-lazy.patch` on `752588d`): the form of position 0 at the session's start, the
# other recorded in place of it (the first form's commands freed) when a token first needs it;
# against both forms recorded at the start (the launcher's first, as `752588d`) and the build
# before them (BASE_BUILD): tg128 in a session of 2049 positions (-p 2048 -n 128: the short form
# runs) and at depth 4096 (the launcher's form runs).
# Here:   BASE_BUILD=/tmp/base1 BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-04-attn-lazy.patch > 2026-12-04-attn-lazy.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08"
warm
for r in 1 2; do
    for m in q08 q9; do
        echo "round $r $m tg128 (2049) base $(B=$P/deltallm.base tgp $m) | both $(tgp $m)" \
            "| lazy $(tgp $m DLX_LAZY=1)"
        echo "round $r $m d4096 base $(B=$P/deltallm.base tgd $m) | both $(tgd $m)" \
            "| lazy $(tgd $m DLX_LAZY=1)"
    done
done
