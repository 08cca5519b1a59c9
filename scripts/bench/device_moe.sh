#!/usr/bin/env bash
# The mixture-of-experts rows on the GPU machine in one device call, under one deadline
# (DEADLINE seconds, default 560): Qwen3.5-35B-A3B and Qwen3-30B-A3B in Q4_K_M, synthesized
# there, ours against llama.cpp (Vulkan, through llama.h) on the same files: pp512, pp2048,
# tg128, then batched decode at B = 8 and 32 (pp512 + tg128 a sequence).
# SPECS (arch:shape, default both), PROMPTS (default 512,2048) and MOE_BATCHES (default 8,32;
# "none" skips the batched rows) narrow the call.
# Here: scripts/bench/device_bench.sh prepare; carry .gl and .devrun.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
out=${OUT:-/tmp/device_moe_out}
source scripts/bench/device_common.sh
models=/tmp/models
mkdir -p "$models"
args=(--ours "$ours" --peer "$peer" --device vulkan --bw-gbps 4800 --peak-gflops 989000)
for spec in ${SPECS:-qwen35moe:35b-a3b qwen3moe:30b-a3b}; do
    IFS=: read -r arch shape <<<"$spec"
    m=$models/$arch-$shape-q4_k_m.gguf
    fits 120 "$arch $shape" || continue
    # (An earlier stage of the same call may have made the file already.)
    [ -f "$m" ] || "$ours" synth --arch "$arch" --shape "$shape" --type q4_k_m -o "$m" 2>&1 | tail -1
    "$ours" info -m "$m" --device vulkan 2>&1 | grep -iE "plan|weights|fit" | head -3
    timeout $(($(left) / 2)) python3 scripts/bench/compare.py "${args[@]}" -m "$m" -p "${PROMPTS:-512,2048}" \
        -n 128 -r 2 --rounds 1 --md "$out/$arch.md" --json "$out/$arch.json" >/dev/null
    cat "$out/$arch.md"
    [ "${MOE_BATCHES:-8,32}" = none ] && { rm -f "$m"; continue; }
    fits 90 "$arch batched" || continue
    timeout $(($(left) - 30)) python3 scripts/bench/compare.py "${args[@]}" -m "$m" -p 512 -n 128 \
        -b "${MOE_BATCHES:-8,32}" -r 1 --rounds 1 --md "$out/$arch-batched.md" --batched-json "$out/$arch-batched.json" \
        >/dev/null
    cat "$out/$arch-batched.md"
    rm -f "$m"
done
echo "== done at $SECONDS s"
