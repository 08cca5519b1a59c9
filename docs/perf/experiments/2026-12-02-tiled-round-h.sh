#!/usr/bin/env bash
# The second measurement of docs/perf/history.md's entry "2026-12-02 (evening)": the residual stream
# rounded once by its writer for the next norm's readers (DELTALLM_VK_GEMV_ROUND_H=1, the
# default) against each reader rounding it (0), every Q4_K / Q6_K GEMV on the tiled GEMV, and
# against gemv.comp reading the tiles (DELTALLM_VK_GEMV_TILED=off). Device: one call carrying
# .gl and .devrun that runs this script on the packed binaries of
# `scripts/vk/device_reports.sh prepare`; OUT receives the test log.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen3 8b q8" "qwen35 0.8b q08"
$T --gtest_brief=1 --gtest_filter='*Gemv*:*Driver*:*Decode*' > ${OUT:-/tmp}/round-h-suite.txt 2>&1
echo "suite: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' ${OUT:-/tmp}/round-h-suite.txt | tr '\n' ' ')"
prof() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A14 "profile, decode" | grep -E "decode|gemv|head|deltanet|attention" | sed 's/  */ /g' | tr '\n' ' '; }
for m in q9 q8 q08; do
    for v in 1 0; do echo "[$m] round_h $v: $(prof $m DELTALLM_VK_GEMV_ROUND_H=$v)"; done
done
tgb() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '; }
for m in q9 q8 q08; do
    echo "[$m] tg128 round_h 1 / 0 / tiled off: $(tgb $m DELTALLM_VK_GEMV_ROUND_H=1) / $(tgb $m DELTALLM_VK_GEMV_ROUND_H=0) / $(tgb $m DELTALLM_VK_GEMV_TILED=off)"
done
for m in q9 q8 q08; do
    echo "[$m] greedy: $($B run -m /tmp/$m.gguf --device vulkan -p 'The quick brown fox' -n 16 --temp 0 2>/dev/null | tr '\n' ' ' | cut -c1-200)"
done
