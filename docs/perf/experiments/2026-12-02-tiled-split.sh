#!/usr/bin/env bash
# The third measurement of docs/perf/history.md's entry "2026-12-02 (evening)": the tiled GEMVs that add
# to the residual stream split over workgroups where their tiles are fewer than the device's
# multiprocessors (DELTALLM_VK_GEMV_SPLIT=0, the default) or not (1), with the residual stream
# rounded by its writers (DELTALLM_VK_GEMV_ROUND_H=1) or by its readers (0). Device: one call
# carrying .gl and .devrun that runs this script on the packed binaries of
# `scripts/vk/device_reports.sh prepare`; OUT receives the test log.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen3 8b q8" "qwen35 0.8b q08"
$T --gtest_brief=1 --gtest_filter='*GemvTile*:*GemvXPaths*Tiled*:*Driver*:*Decode*' > ${OUT:-/tmp}/split-suite.txt 2>&1
echo "suite: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' ${OUT:-/tmp}/split-suite.txt | tr '\n' ' ')"
prof() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A14 "profile, decode" | grep -E "decode|gemv|head|deltanet|attention" | sed 's/  */ /g' | tr '\n' ' '; }
C0="DELTALLM_VK_GEMV_SPLIT=0 DELTALLM_VK_GEMV_ROUND_H=0"
C1="DELTALLM_VK_GEMV_SPLIT=1 DELTALLM_VK_GEMV_ROUND_H=0"
C2="DELTALLM_VK_GEMV_SPLIT=0 DELTALLM_VK_GEMV_ROUND_H=1"
for m in q9 q08; do
    for c in "$C0" "$C1" "$C2"; do echo "[$m] $c: $(prof $m "$c")"; done
done
tgb() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '; }
for m in q9 q8 q08; do
    echo "[$m] tg128 split+readers / no split / split+writers: $(tgb $m "$C0") / $(tgb $m "$C1") / $(tgb $m "$C2")"
done
