#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-02 (late morning)": the GEMVs that share a
# decode stage, each shaped by its part of the stage's bytes (Kernels::shared_shape), against the
# build before it. The entry's first rows came from two temporary forms not in the tree:
# 2026-12-02-stage-shares.patch (every GEMV of a stage balanced over its share of the slots and
# capped there: DLX_SHARE=1, DLX_SHARE_Q6 weighing Q6_K bytes) and 2026-12-02-stage-plan.patch (one
# plan for the stage's grids and rows a group by their bytes a slot: DLX_SHARE=1), each run with
# the profile, tg128 and logits lines below under its switch.
#
# Here:   git checkout 4b506d1 && BUILD_DIR=build-vk bash scripts/build.sh
#         strip -o .devrun/deltallm_base build-vk/deltallm && git checkout main
#         BUILD_DIR=build-vk bash scripts/build.sh
#         BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-stage-plan.patch > 2026-12-02-stage-plan.patch
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-stage-shares.patch > 2026-12-02-stage-shares.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
B0=$PWD/.devrun/deltallm_base
synth "qwen35 9b q9" "qwen3 8b q8" "qwen35 0.8b q08"
DELTALLM_VK_TEST_ROBUST=0 PARTS=suite FILTER='*Gemv*:VulkanDriver*:VulkanDecodeFusion*' \
    OUT=${OUT:-/tmp} bash scripts/vk/device_reports.sh run 2>&1 | grep -E "suite|PASSED|FAILED|SKIPPED|messages"
for m in q9 q08 q8; do
    for b in $B0 $B; do
        timeout 100 $b run -m /tmp/$m.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 8 --temp 0 \
            --ignore-eos --dump-logits /tmp/$(basename $b)_$m.npy >/dev/null 2>&1
    done
    python3 -c "import numpy as np; a=np.load('/tmp/deltallm_base_$m.npy'); b=np.load('/tmp/deltallm_$m.npy'); print('$m max |diff|', np.abs(a-b).max(), a.shape)"
done
prof() { $1 bench -m /tmp/$2.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A14 "profile, decode" | grep -E "decode|gemv in" | sed 's/  */ /g' | tr '\n' ' '; }
for m in q08 q9 q8; do
    echo "[$m] base: $(prof $B0 $m)"
    echo "[$m] new: $(prof $B $m)"
done
tgb() { $1 bench -m /tmp/$2.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '; }
for r in 1 2; do for m in q08 q9 q8; do
    echo "[$m] base $(tgb $B0 $m) | new $(tgb $B $m)"
done; done
