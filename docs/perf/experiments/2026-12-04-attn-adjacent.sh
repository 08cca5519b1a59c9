#!/usr/bin/env bash
# Whether the pipelines' creation order is what slows the token command recorded second: with
# DLX_ADJ=1 (`2026-12-04-attn-adjacent.patch` on `77f9410`) the launcher's form, recorded first,
# also creates the short form's attention pipeline right after its own, so the second command
# brings no pipeline of its own; against `77f9410` and the build before the two forms
# (BASE_BUILD): tg128 in a session of 2049 positions (the short form runs, recorded second) and
# at depth 4096 (the launcher's form).
# Here:   BASE_BUILD=/tmp/base1 BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-04-attn-adjacent.patch > 2026-12-04-attn-adjacent.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08"
warm
for r in 1 2; do
    for m in q08 q9; do
        echo "round $r $m tg128 (2049) base $(B=$P/deltallm.base tgp $m) | as is $(tgp $m)" \
            "| adjacent $(tgp $m DLX_ADJ=1)"
    done
done
echo "q08 d4096 base $(B=$P/deltallm.base tgd q08) | as is $(tgd q08) | adjacent $(tgd q08 DLX_ADJ=1)"
