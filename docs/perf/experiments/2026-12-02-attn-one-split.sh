#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-02 (forenoon)", with the kept switch
# DELTALLM_VK_ATTN_ONE_SPLIT (the entry's first rows came from a temporary form of it, chunks a
# split at least, named min1/min2/min4 there): the decode attention against the build before it.
#
# Here:   git checkout 54f880c && BUILD_DIR=build-vk bash scripts/build.sh
#         strip -o .devrun/deltallm_nt0 build-vk/deltallm && git checkout main
#         BUILD_DIR=build-vk bash scripts/build.sh
#         BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
B0=$PWD/.devrun/deltallm_nt0
synth "qwen35 9b q9" "qwen3 8b q8" "qwen35 0.8b q08"
DELTALLM_VK_TEST_ROBUST=0 PARTS=suite FILTER='*Attention*:VulkanDriver*:VulkanDecodeFusion*' \
    OUT=${OUT:-/tmp} bash scripts/vk/device_reports.sh run 2>&1 | grep -E "suite|PASSED|FAILED|SKIPPED|messages"
for m in q9 q08; do
    for b in $B0 $B; do
        timeout 100 $b run -m /tmp/$m.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 8 --temp 0 \
            --ignore-eos --dump-logits /tmp/$(basename $b)_$m.npy >/dev/null 2>&1
    done
    python3 -c "import numpy as np; a=np.load('/tmp/deltallm_nt0_$m.npy'); b=np.load('/tmp/deltallm_$m.npy'); print('$m max |diff|', np.abs(a-b).max(), a.shape)"
done
tgb() { $1 bench -m /tmp/$2.gguf --device vulkan -p 0 -n 128 -d ${3:-0} -r 2 --bw-gbps 4800 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '; }
for r in 1 2; do for m in q9 q8 q08; do
    echo "[$m] base $(tgb $B0 $m) | 0 $(DELTALLM_VK_ATTN_ONE_SPLIT=0 tgb $B $m) | 2 $(tgb $B $m) | 4 $(DELTALLM_VK_ATTN_ONE_SPLIT=4 tgb $B $m)"
done; done
prof() { $1 bench -m /tmp/$2.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A10 "profile, decode" | grep -E "decode|attention" | sed 's/  */ /g' | tr '\n' ' '; }
for m in q9 q8 q08; do
    echo "[$m] base: $(prof $B0 $m)"
    for v in 0 2 4; do echo "[$m] $v: $(DELTALLM_VK_ATTN_ONE_SPLIT=$v prof $B $m)"; done
done
for r in 1 2; do for m in q9 q8; do for d in 1024 4096; do
    echo "[$m] d$d base $(tgb $B0 $m $d) | 2 $(tgb $B $m $d)"
done; done; done
