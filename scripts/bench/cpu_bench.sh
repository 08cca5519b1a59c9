#!/usr/bin/env bash
# deltallm vs llama.cpp (CPU builds) on this machine in one command: builds deltallm (Release,
# build-bench) and the llama.cpp peer (scripts/bench/setup_peer.sh, build-peer), synthesizes
# Qwen3.5-0.8B Q4_K_M, runs both engines alternating (pp128, tg32), a prompt sweep 64..512, and
# writes the tables, JSON, CSV and PNGs to $OUT (default .tools/cpu-bench).
#   [THREADS=2] [REPS=5] [ROUNDS=2] [OUT=dir] scripts/bench/cpu_bench.sh
# Quote the numbers only from a quiet machine: compare.py prints the load average of each start.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$repo/.tools/cpu-bench}
models=${MODELS_DIR:-$repo/.tools/models}
threads=${THREADS:-$(nproc)}
mkdir -p "$out" "$models"

cmake -S "$repo" -B "$repo/build-bench" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$repo/build-bench" --target deltallm >/dev/null
bash "$repo/scripts/bench/setup_peer.sh" >/dev/null
cmake -S "$repo/bench" -B "$repo/build-peer" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$repo/build-peer" >/dev/null

f=$models/qwen35-0.8b-q4_k_m.gguf
[ -f "$f" ] || "$repo/build-bench/deltallm" synth --arch qwen35 --shape 0.8b --type q4_k_m -o "$f"
cd "$repo"
python3 scripts/bench/compare.py -m "$f" --device cpu -t "$threads" -p 128 -n 32 \
    -r "${REPS:-5}" --rounds "${ROUNDS:-2}" \
    --md "$out/table-cpu-0.8b.md" --json "$out/table-cpu-0.8b.json" --csv "$out/table-cpu-0.8b.csv"
python3 scripts/bench/compare.py -m "$f" --device cpu -t "$threads" --sweep \
    --sweep-lengths 64,128,256,512 -r 2 --rounds 1 --md "$out/sweep-cpu-0.8b.md" \
    --csv "$out/sweep-cpu-0.8b.csv"
# The python3 first on PATH may be a private one without matplotlib; Debian's has it.
py=python3
python3 -c "import matplotlib" 2>/dev/null || py=/usr/bin/python3
for c in "$out"/*.csv; do
    "$py" scripts/bench/plot.py "$c" "${c%.csv}.png" || true
done
ls "$out"
