#!/usr/bin/env bash
# deltallm serve vs llama-server on the GPU machine, same GGUF, same client, one device call.
#
# Needs what scripts/bench/device_bench.sh unpacks (the loader from .gl, our binary in
# .tools/device-bench) and llama-server from scripts/bench/peer_server.sh in PEER_SERVER (default
# /tmp/ps); when missing, unpacked from .devrun/extra/llama-server.tar.xz (peer_server.sh pack) if
# that was carried, else built first, which takes minutes.
#   [MODEL=qwen35:9b:q4_k_m] [LEVELS=1,8,32] [REQUESTS=64] [WAVES=0] [WORKLOADS="random multiturn"]
#   [CTX=4096] [DOC_WORDS=1500] [SERVE_TIMEOUT=240] (seconds for each engine's workload; the
#   levels done when it is cut are kept in the JSON)
#   [WARMUP=8] [OURS_ARGS=-v] [PEER_ARGS=] [ENGINES="deltallm llama-server"] [THINK_MS=0]
#   scripts/bench/device_serve.sh
# OURS_ARGS go to `deltallm serve` (-v: every step's rows and time, each admission, snapshot and
# pipeline compile with its time, in server-deltallm.log), PEER_ARGS to llama-server (a template
# for both: OURS_ARGS="--chat-template-file F" PEER_ARGS="--jinja --chat-template-file F").
# WARMUP requests go to each server before its first level, unmeasured (pipelines and commands
# made on first use); after each workload the server's /metrics are kept (ours: the steps' time).
# Each engine serves with as many slots as the highest level and the same context per slot;
# scripts/bench/serve_bench.py drives both (streamed chat completions, outputs forced to their
# length with ignore_eos; the multi-turn chats open with a document of FIRST_TURN_WORDS words
# (default 400: the synthetic files' vocabulary makes about 4 tokens a word; a 1,500-word
# turn overflowed a 4,096-token slot on 2026-12-05, and 500 words gave turn-2 prompts of up to
# 4,125 tokens on 2026-12-06, failed with 400 and left out of both servers' rows), so
# the later turns' TTFT shows whether the history is prefilled again); the chat workload opens
# with a document of DOC_WORDS words (1,500 need CTX=8192) and asks short questions after it,
# so a later turn is mostly history. Results: $OUT/serve-<engine>-<workload>.json and serve.md.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
out=${OUT:-/tmp/device_serve_out}
mkdir -p "$out"
pack=$repo/.tools/device-bench
ours=$pack/deltallm
export LD_LIBRARY_PATH=$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
peer_dir=${PEER_SERVER:-/tmp/ps}
if [ ! -x "$peer_dir/llama-server" ] && [ -f .devrun/extra/llama-server.tar.xz ]; then
    echo "== unpacking llama-server"
    bash scripts/bench/peer_server.sh unpack .devrun/extra/llama-server.tar.xz "$peer_dir" || exit 1
elif [ ! -x "$peer_dir/llama-server" ]; then
    echo "== building llama-server"
    bash scripts/bench/peer_server.sh build "$peer_dir" || exit 1
fi
levels=${LEVELS:-1,8,32}
slots=$(echo "$levels" | tr , '\n' | sort -n | tail -1)
ctx=${CTX:-4096}
IFS=: read -r arch shape type <<<"${MODEL:-qwen35:9b:q4_k_m}"
models=${MODELS_DIR:-/tmp/models}
mkdir -p "$models"
f=$models/$arch-$shape-$type.gguf
[ -f "$f" ] || "$ours" synth --arch "$arch" --shape "$shape" --type "$type" -o "$f" 2>&1 | tail -1

wait_ready() {  # port pid
    for _ in $(seq 1 240); do
        kill -0 "$2" 2>/dev/null || return 1
        python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$1/health', timeout=2)" \
            2>/dev/null && return 0
        sleep 0.5
    done
    return 1
}

run_engine() {  # name port command...
    local name=$1 port=$2
    shift 2
    echo "== $name: $*"
    "$@" >"$out/server-$name.log" 2>&1 &
    local pid=$!
    if ! wait_ready "$port" "$pid"; then
        echo "$name did not come up"; tail -20 "$out/server-$name.log"; kill "$pid" 2>/dev/null; return 1
    fi
    # THINK_MS: pauses before later turns (ms; several: a run of the multi-turn workloads each,
    # named serve-<engine>-<workload>-think<ms>.json where not 0).
    for w in ${WORKLOADS:-random multiturn}; do
      for think in ${THINK_MS:-0}; do
        case $w:$think in random:[1-9]* | long:[1-9]*) continue ;; esac
        suffix=; [ "$think" = 0 ] || suffix=-think$think
        # (Each pause its own prompts, the same for every engine: a later run on the same server
        # would otherwise find the earlier run's conversations in its cache.)
        timeout "${SERVE_TIMEOUT:-240}" python3 scripts/bench/serve_bench.py --url "http://127.0.0.1:$port" \
            --seed $((1 + think)) \
            --workload "$w" --requests "${REQUESTS:-64}" --concurrency "$levels" --turns "${TURNS:-4}" \
            --first-turn-words "${FIRST_TURN_WORDS:-400}" --doc-words "${DOC_WORDS:-1500}" \
            --waves "${WAVES:-0}" --think-ms "$think" \
            --warmup "${WARMUP:-8}" --json "$out/serve-$name-$w$suffix.json"
        echo "rc=$?"
        # The server's own counters after the workload (ours: where a step's time went).
        python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:$port/metrics', timeout=5).read().decode())" \
            >"$out/metrics-$name-$w$suffix.txt" 2>&1
        grep -E '^deltallm_(step|steps|prompt_step|snapshot|next_turn)' "$out/metrics-$name-$w$suffix.txt"
      done
    done
    kill -TERM "$pid"
    wait "$pid"
    echo "$name exit status $?"
}

# ENGINES (default "deltallm llama-server"): also "unmixed", ours with each prompt chunk as a
# window of its own (DELTALLM_VK_MIXED_STEPS=0), for the step command's before and after; and
# "bigcache", ours with a prefix cache of BIG_CACHE_MIB (default 40000) in device memory and
# 16,000 MiB in host memory.
for engine in ${ENGINES:-deltallm llama-server}; do
    case $engine in
    deltallm)
        run_engine deltallm 8080 "$ours" serve -m "$f" --device vulkan --parallel "$slots" \
            -c "$ctx" --port 8080 --metrics ${OURS_ARGS:-} ;;
    unmixed)
        run_engine unmixed 8082 env DELTALLM_VK_MIXED_STEPS=0 "$ours" serve -m "$f" \
            --device vulkan --parallel "$slots" -c "$ctx" --port 8082 --metrics ${OURS_ARGS:-} ;;
    bigcache)
        run_engine bigcache 8083 "$ours" serve -m "$f" --device vulkan --parallel "$slots" \
            -c "$ctx" --port 8083 --metrics --cache-mib "${BIG_CACHE_MIB:-40000}" \
            --cache-host-mib 16000 ${OURS_ARGS:-} ;;
    llama-server)
        run_engine llama-server 8081 "$peer_dir/llama-server" -m "$f" -ngl 999 \
            --parallel "$slots" -c $((ctx * slots)) --port 8081 --host 127.0.0.1 --no-webui \
            ${PEER_ARGS:-} ;;
    esac
done
python3 scripts/bench/serve_compare.py "$out"/serve-deltallm-*.json --peer-dir "$out" --png-dir "$out" \
    >"$out/serve.md"
cat "$out/serve.md"
