#!/usr/bin/env bash
# The order of the two token command forms of a session (DriverOptions::attn_short), against the
# build before them (BASE_BUILD). Call 1 ran a build that recorded the short form first, with
# DLX_LONG_FIRST=1 recording the launcher's first: tg128 at depth 4096 (the launcher's form runs)
# and from an empty context (-n 128 alone: a session of 129 positions, only the short form
# recorded, so both orders run the same). Call 2 (ORDER=2) ran `752588d`, which records the
# launcher's form first, with `2026-12-04-attn-order.patch` (DLX_SHORT_FIRST=1: the short form
# first): tg128 in a session of 2049 positions (-p 2048 -n 128, the comparison's: both forms
# recorded, the short one runs) and at depth 4096.
# Here:   BASE_BUILD=/tmp/base1 BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-04-attn-order.patch > 2026-12-04-attn-order.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08"
warm
if [ "${ORDER:-1}" = 1 ]; then
    for r in 1 2; do
        for m in q08 q9; do
            echo "round $r $m d4096 base $(B=$P/deltallm.base tgd $m) | short first $(tgd $m)" \
                "| long first $(tgd $m DLX_LONG_FIRST=1)"
            echo "round $r $m d0 base $(B=$P/deltallm.base tgb $m) | short first $(tgb $m)" \
                "| long first $(tgb $m DLX_LONG_FIRST=1)"
        done
    done
    exit
fi
for r in 1 2; do
    for m in q9 q08; do
        echo "round $r $m tg128 (2049) base $(B=$P/deltallm.base tgp $m) | long first $(tgp $m)" \
            "| short first $(tgp $m DLX_SHORT_FIRST=1)"
    done
done
for m in q08 q9; do
    echo "$m d4096 base $(B=$P/deltallm.base tgd $m) | long first $(tgd $m)" \
        "| short first $(tgd $m DLX_SHORT_FIRST=1)"
done
