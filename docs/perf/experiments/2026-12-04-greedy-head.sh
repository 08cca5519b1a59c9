#!/usr/bin/env bash
# The greedy choice made by the head's own workgroups (gemv_tile.comp ARGMAX; the greedy token
# command without the sampling passes and their stage) against the build before (BASE_BUILD),
# the new build first in each round: the token timed whole and tg128 (the logits command: nothing
# should move), `run` generating 512 tokens chosen on the device, greedy (the new command) and
# sampled (unchanged); the greedy ids of both builds over 200 tokens; the driver, sampling, tiled
# GEMV choice and decode fusion tests under the Khronos validation layer.
# Here:   BASE_BUILD=/tmp/base3 BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08"
export ROLES="head|sample"
warm
for r in 1 2; do
    for m in q9 q08; do
        for b in new base; do
            bb=$B
            [ $b = base ] && bb=$P/deltallm.base
            echo "round $r $m $b $(B=$bb whole $m) | tg128 $(B=$bb tgb $m) | run greedy" \
                "$(B=$bb gen $m --temp 0) sampled $(B=$bb gen $m --temp 0.8 --top-k 40 --seed 1)"
        done
    done
done
same_ids q9 q08
validate 'VulkanDriver.*:DeviceSampling.*:GemvTileArgmax.*:VulkanDecodeFusion.*'
