#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-02 (evening)": the engine with Q4_K and Q6_K
# rows held in tiles and its decode GEMVs on the tiled GEMV (DELTALLM_VK_GEMV_TILED: off puts
# every GEMV on gemv.comp reading the tiles, auto the rows of up to 8192 values on the tiled
# GEMV, all every one). Device: one call carrying .gl and .devrun that runs this script on the
# packed binaries of `scripts/vk/device_reports.sh prepare`; OUT receives the test log.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen3 8b q8" "qwen35 0.8b q08"
$T --gtest_brief=1 --gtest_filter='*Gemv*:*Gemm*:*Driver*:*Decode*:*Window*:*GetRows*:*Dequant*' \
    > ${OUT:-/tmp}/tiled-suite.txt 2>&1
echo "suite: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' ${OUT:-/tmp}/tiled-suite.txt | tr '\n' ' ')"
prof() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A14 "profile, decode" | grep -E "decode|gemv|head|deltanet|attention" | sed 's/  */ /g' | tr '\n' ' '; }
for m in q9 q8 q08; do
    for v in off auto all; do echo "[$m] $v: $(prof $m DELTALLM_VK_GEMV_TILED=$v)"; done
done
tgb() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '; }
for m in q9 q8 q08; do
    echo "[$m] tg128 off / auto / all: $(tgb $m DELTALLM_VK_GEMV_TILED=off) / $(tgb $m DELTALLM_VK_GEMV_TILED=auto) / $(tgb $m DELTALLM_VK_GEMV_TILED=all)"
done
for m in q9 q08; do
    echo "[$m] pp: $($B bench -m /tmp/$m.gguf --device vulkan -p 512,2048 -n 0 -r 2 2>&1 | grep -E 'pp|rror' | cut -d'|' -f7,8 | tr '\n' ' ')"
done
