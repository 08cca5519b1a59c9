#!/usr/bin/env bash
# The serving scheduler and prefix cache of two deltallm binaries on the CPU chain (no GPU
# needed), on the same chat workload: each serves a synthetic model in turn, serve_bench.py
# drives it, and its /metrics are kept beside the results.
#   scripts/bench/cpu_serve_ab.sh OUT_DIR NAME=BINARY [NAME=BINARY ...]
# (an older commit's binary: scripts/bench/build_at.sh <commit> leaves /tmp/deltallm-<commit>).
# MODEL (default qwen35:0.8b:q4_k_m), LEVELS (4), REQUESTS (8), DOC_WORDS (150), CTX (2048),
# SERVE_ARGS (default "--cache-every 128 --cache-mib 120": waypoints every 128 tokens and a
# cache of a few of the 0.8B's snapshots, so that eviction decides what the next turns find).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$1
shift
mkdir -p "$out"
IFS=: read -r arch shape type <<<"${MODEL:-qwen35:0.8b:q4_k_m}"
model=/tmp/models/$arch-$shape-$type.gguf
mkdir -p /tmp/models
first_bin=${1#*=}
[ -f "$model" ] || "$first_bin" synth --arch "$arch" --shape "$shape" --type "$type" -o "$model"
for pair in "$@"; do
    name=${pair%%=*} bin=${pair#*=}
    port=$((18000 + RANDOM % 1000))
    # shellcheck disable=SC2086
    "$bin" serve -m "$model" --device cpu --parallel "${LEVELS:-4}" -c "${CTX:-2048}" \
        --port "$port" --metrics ${SERVE_ARGS:---cache-every 128 --cache-mib 120} \
        >"$out/server-$name.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 120); do
        curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
        sleep 0.5
    done
    python3 "$repo/scripts/bench/serve_bench.py" --url "http://127.0.0.1:$port" \
        --workload chat --doc-words "${DOC_WORDS:-150}" --question-words 4,16 --turns 2 \
        --output-tokens 8,24 --requests "${REQUESTS:-8}" --concurrency "${LEVELS:-4}" \
        --json "$out/serve-$name.json" | tee "$out/serve-$name.md"
    curl -s "http://127.0.0.1:$port/metrics" | grep -v '^#' >"$out/metrics-$name.txt"
    grep -E '^deltallm_(snapshot|prefix_cache_hit|step_seconds|prompt_step)' "$out/metrics-$name.txt"
    kill -TERM "$pid"
    wait "$pid" || true
done
