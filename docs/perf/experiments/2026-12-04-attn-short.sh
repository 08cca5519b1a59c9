#!/usr/bin/env bash
# The token command in two forms (DriverOptions::attn_short): the decode attention with one query
# head a workgroup below the positions the rule gives (9B 1024, 0.8B 2048, Qwen3-8B 320), the
# launcher's form from there, against the build before (BASE_BUILD), the new build first in each
# round: the token timed whole and tg128 from an empty context; tg128 at depth 4096 (the
# launcher's form in both builds: nothing should move); `run`'s rate over 512 tokens (a session
# of the plan's context, both forms recorded); the attention, driver and decode fusion tests
# under the Khronos validation layer.
# Here:   BASE_BUILD=/tmp/base1 BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: calls carrying .gl and .devrun that run this script, MODELS naming the files of the
# rounds (call 1: q9 q08, VALIDATE=1; call 2: q3) and DEPTH_MODELS those at depth 4096 and of
# `run` (call 2: q3 q08 q9; default MODELS).
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08" "qwen3 8b q3"
export ROLES="attention"
warm
for r in 1 2; do
    for m in ${MODELS:-q9 q08}; do
        for b in new base; do
            bb=$B
            [ $b = base ] && bb=$P/deltallm.base
            echo "round $r $m $b $(B=$bb whole $m) | tg128 $(B=$bb tgb $m)"
        done
    done
done
for m in ${DEPTH_MODELS:-${MODELS:-q9 q08}}; do
    for b in new base; do
        bb=$B
        [ $b = base ] && bb=$P/deltallm.base
        echo "$m $b tg128 @ d4096 $(B=$bb tgd $m) | run greedy $(B=$bb gen $m --temp 0)"
    done
done
[ -n "$VALIDATE" ] && validate 'Shapes/Attention.*:VulkanDriver.*:VulkanDecodeFusion.*'
