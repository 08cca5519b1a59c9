#!/usr/bin/env bash
# tg128 at depth 4096 (the launcher's attention form in both builds) of the build with the
# short-context token command and of the build before (BASE_BUILD), alternating, the base first:
# whether the new build's long contexts lose anything (2026-12-04-attn-short.sh read its 0.8B
# 1 % lower there, with a spread ten times the base's). SHORT0=1: the 0.8B only, and the new
# build also with DELTALLM_VK_ATTN_SHORT=0 (no short-context command recorded).
# Here:   BASE_BUILD=/tmp/base1 BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08"
export REPS=3
warm
for r in 1 2 3; do
    for m in q08 q9; do
        [ -n "$SHORT0" ] && [ $m = q9 ] && continue
        echo "round $r $m base $(B=$P/deltallm.base tgd $m) | new $(tgd $m)" \
            "${SHORT0:+| new, no short form $(tgd $m DELTALLM_VK_ATTN_SHORT=0)}"
    done
done
