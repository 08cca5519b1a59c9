#!/usr/bin/env bash
# Queued token passes (the generate loop submits the pass for the token the running pass will
# choose before it ends; the DeltaNet state in two copies, a token command reading one and
# writing the other; here the second copy in a buffer of its own behind a seventh binding of the
# step, an earlier form of 2026-12-04-queued.patch) against the build before (BASE_BUILD), the
# new build first in each round:
# the token timed whole and tg128 (nothing should move), then `run` generating 512 tokens chosen
# on the device, greedy and sampled (the generation rate it prints), and the greedy ids of both
# builds compared. Last, the decode fusion, driver and sampling tests under the Khronos
# validation layer.
# Here:   BASE_BUILD=/tmp/base3 BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-04-queued.patch > 2026-12-04-queued.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08" "qwen3 8b q8b"
export ROLES="deltanet|attention"
vs_base q9 q08 q8b
for r in 1 2; do
    for m in q9 q08 q8b; do
        for c in "--temp 0" "--temp 0.8 --top-k 40 --seed 1"; do
            echo "round $r $m [$c] run new $(gen $m $c) base $(B=$P/deltallm.base gen $m $c)"
        done
    done
done
same_ids q9 q08
validate 'VulkanDecodeFusion.*:VulkanDriver.*:DeviceSampling.*'
