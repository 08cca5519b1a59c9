#!/usr/bin/env bash
# The CPU dot products in AVX-512 VNNI against the AVX2 ones and llama.cpp's CPU build, on this
# machine (2 cores), Qwen3.5-0.8B Q4_K_M (synthetic): single stream (pp128, pp512, tg32) and
# batched rows (B = 4, 8; 64-token prompts, 16 steps), each backend alternating with llama.cpp.
#   OURS=build/deltallm PEER=build-peer/cpu/peer_bench OUT=dir bash this-script
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
ours=${OURS:-$repo/build-bench/deltallm}
peer=${PEER:-$repo/build-peer/cpu/peer_bench}
out=${OUT:-$repo/.tools/cpu-vnni}
mkdir -p "$out"
f=$out/qwen35-0.8b-q4_k_m.gguf
[ -f "$f" ] || "$ours" synth --arch qwen35 --shape 0.8b --type q4_k_m -o "$f"
cd "$repo"
uptime
for features in auto avx2; do
    echo "== DELTALLM_CPU_FEATURES=$features"
    DELTALLM_CPU_FEATURES=$features python3 scripts/bench/compare.py -m "$f" --device cpu -t 2 \
        -p 128,512 -n 32 -r 3 --rounds 2 --ours "$ours" --peer "$peer" \
        --md "$out/single-$features.md" --json "$out/single-$features.json" | tail -5
    DELTALLM_CPU_FEATURES=$features python3 scripts/bench/compare.py -m "$f" --device cpu -t 2 \
        -p 64 -n 16 -b 4,8 -r 2 --rounds 2 --ours "$ours" --peer "$peer" \
        --md "$out/batched-$features.md" | tail -8
done
uptime
