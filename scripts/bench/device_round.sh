#!/usr/bin/env bash
# Every open measurement of the GPU machine in one device call, stage by stage under one deadline
# (DEADLINE seconds, default 560; a stage that would not fit is skipped and says so), for when
# device time allows a single call:
#   1. llama-server unpacked from .devrun/extra/llama-server.tar.xz when carried (peer_server.sh
#      pack), else built in the background (scripts/bench/peer_server.sh, idle cores only)
#   2. before/after: the binary of BEFORE_BIN (a build of an earlier commit) and ours, alternating,
#      pp512, pp2048, tg128 on Qwen3.5-9B, Qwen3.5-0.8B and Qwen3-8B Q4_K_M (synthesized here)
#   3. batched: B = 8, 32, 64 sequences of pp512 + tg128 on the 9B, both engines
#   4. the built-in model on the GPU: held-out perplexity (HELD_OUT text) and the trained-model
#      tests (TEST_TOOLS binary) on the Vulkan driver
#   5. the Vulkan tests (TEST_VULKAN binary) under the Khronos validation layer
#   6. serving: scripts/bench/device_serve.sh at concurrency 1, 8, 32, 64, random and two-turn
#      chats (when llama-server is built by then)
#   7. with time left: ours vs llama.cpp (Vulkan) single-stream on the 9B and 0.8B
# Here: scripts/bench/device_bench.sh prepare, then put BEFORE_BIN, TEST_TOOLS and TEST_VULKAN
# (xz-compressed), HELD_OUT and llama-server.tar.xz under .devrun/extra; carry .gl and those paths.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
out=${OUT:-/tmp/device_round_out}
extra=$repo/.devrun/extra
source scripts/bench/device_common.sh
for b in deltallm-before test_tools test_vulkan; do
    [ -f "$extra/$b.xz" ] && xz -dc "$extra/$b.xz" >"/tmp/$b" && chmod +x "/tmp/$b"
done

if [ -f "$extra/llama-server.tar.xz" ]; then
    bash scripts/bench/peer_server.sh unpack "$extra/llama-server.tar.xz" /tmp/ps \
        >"$out/peer-server-build.log" 2>&1 &
else
    (JOBS=${PEER_JOBS:-12} timeout $((deadline - 200)) nice -n 19 bash scripts/bench/peer_server.sh build /tmp/ps \
        >"$out/peer-server-build.log" 2>&1) &
fi
build_pid=$!

models=/tmp/models
mkdir -p "$models"
for spec in qwen35:9b:q4_k_m qwen35:0.8b:q4_k_m qwen3:8b:q4_k_m; do
    IFS=: read -r arch shape type <<<"$spec"
    "$ours" synth --arch "$arch" --shape "$shape" --type "$type" -o "$models/$arch-$shape-$type.gguf" 2>&1 | tail -1
done
m9=$models/qwen35-9b-q4_k_m.gguf
m08=$models/qwen35-0.8b-q4_k_m.gguf
m8=$models/qwen3-8b-q4_k_m.gguf

if [ -x /tmp/deltallm-before ] && fits 100 "before/after"; then
    for m in "$m9" "$m08" "$m8"; do
        for b in /tmp/deltallm-before "$ours"; do
            echo "-- $(basename "$b") $(basename "$m")"
            timeout 40 "$b" bench -m "$m" --device vulkan -p 512,2048 -n 128 -r 2 -o csv 2>/dev/null
        done
    done | tee "$out/before-after.csv"
fi

floors=(--bw-gbps 4800 --peak-gflops 989000)
args=(--ours "$ours" --peer "$peer" --device vulkan "${floors[@]}")
if fits 120 "batched 9B"; then
    timeout 200 python3 scripts/bench/compare.py "${args[@]}" -m "$m9" -p 512 -n 128 -b 8,32,64 \
        -r 1 --rounds 1 --md "$out/batched.md" --batched-json "$out/batched.json" >/dev/null
    cat "$out/batched.md"
fi

if fits 40 "built-in model on the GPU"; then
    [ -f "$extra/heldout.txt" ] &&
        timeout 30 "$ours" perplexity -m models/deltallm-tiny-q8_0.gguf -f "$extra/heldout.txt" -c 512 \
            --chunks 400 --device vulkan 2>&1 | tail -2
    [ -x /tmp/test_tools ] && DELTALLM_BIN=$ours DELTALLM_TEST_DATA=$repo/tests/data DELTALLM_TEST_TMP=/tmp \
        timeout 60 /tmp/test_tools --gtest_filter='OnDevice/TrainedModel.*vulkan' 2>&1 |
        grep -E "vulkan:|OK|FAILED|PASSED|Failure" | head -20
fi

if [ -x /tmp/test_vulkan ] && fits 40 "Vulkan tests under the validation layer"; then
    VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation DELTALLM_VK_VALIDATION=1 DELTALLM_TEST_TMP=/tmp \
        timeout 60 /tmp/test_vulkan --gtest_brief=1 \
        --gtest_filter="${VALIDATION_FILTER:-*Batched*:*Scheduler*:*WindowPrefill*:*DecodeFusion*:*Experts*}" \
        >"$out/validation.log" 2>&1
    echo "rc=$? validation errors: $(grep -c 'Validation Error' "$out/validation.log")"
    tail -3 "$out/validation.log"
    grep -m3 'Validation Error' "$out/validation.log" | cut -c1-300
fi
# The serving stage waits for the peer's build while enough time is left for it.
while [ ! -x /tmp/ps/llama-server ] && kill -0 "$build_pid" 2>/dev/null && [ "$(left)" -gt 200 ]; do
    sleep 5
done
if [ -x /tmp/ps/llama-server ] && fits 150 "serving"; then
    LEVELS=${SERVE_LEVELS:-1,8,32,64} REQUESTS=${SERVE_REQUESTS:-24} TURNS=2 PEER_SERVER=/tmp/ps \
        timeout $(($(left) - 10)) bash scripts/bench/device_serve.sh >"$out/serve.log" 2>&1
    tail -12 "$out/serve.log"
else
    echo "== serving: no llama-server yet ($(tail -2 "$out/peer-server-build.log" | tr '\n' ' '))"
fi

if fits 120 "ours vs llama.cpp"; then
    timeout 150 python3 scripts/bench/compare.py "${args[@]}" -m "$m9" -m "$m08" -p 512,2048 -n 128 \
        -r 2 --rounds 1 --md "$out/table.md" --json "$out/table.json" >/dev/null
    cat "$out/table.md"
fi
echo "== done at $SECONDS s"
