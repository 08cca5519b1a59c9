#!/usr/bin/env bash
# deltallm vs llama.cpp (Vulkan; or CUDA with PEER_DEVICE=cuda) on the GPU machine in one device call.
#
# Here (prepare): builds nothing new; packs what the device needs into .tools/device-bench
# (git-ignored): our deltallm binary and the Debian libraries it links that Ubuntu lacks, and the
# Vulkan peer program with only the prebuilt libraries it loads. Prints the size to carry.
#   scripts/bench/device_bench.sh prepare [BUILD_DIR=build-bench] [PEER_BUILD=build-peer]
# The pack is also written xz-compressed to .devrun/device-bench.tar.xz (about 7 MB: the tracked
# tree, .gl and the uncompressed pack together pass the 64 MiB a call may carry).
# There (run): one device call, carrying ".gl" and ".devrun":
#   [MODELS="qwen35:0.8b:q4_k_m ..."|none] [SWEEP=0] [DEPTHS="4096 16384"] [BATCHES=8,32,64]
#     scripts/bench/device_bench.sh run
# unpacks the Vulkan loader, synthesizes the model files on the device (Qwen3.5-0.8B and 9B in
# Q4_K_M and Q8_0, Qwen3-8B Q4_K_M), checks llama.cpp loads them, runs both engines alternating
# (pp512, pp2048, tg128), a prompt sweep 128..8192 on the 9B and writes
# the tables, JSON, CSV (and PNG when matplotlib is there; else plot.py draws it here) to $OUT.
# DEPTHS, when set, adds tg128 at those context depths (compare.py -d: the tokens before the test
# are prefilled, not timed) on Qwen3.5-9B and Qwen3-8B Q4_K_M, into $OUT/table-depth-<file>.*.
# Every repetition prefills its depth again: with MODELS="qwen35:9b:q4_k_m qwen3:8b:q4_k_m"
# SWEEP=0 the call does less besides, to stay within the 10 minutes a device call has.
# PEER_DEVICE=cuda runs llama.cpp's CUDA build instead of its Vulkan build (see below).
# BATCHES=8,32,64, when set, adds batched rows (compare.py -b: B sequences, their pp512 prompts in
# one step, then 128 steps of one token of each; aggregate t/s of both engines) on
# BATCH_MODELS (default Qwen3.5-9B and 0.8B Q4_K_M), into $OUT/batched-<file>.*; with MODELS=none
# SWEEP=0 the call runs only those.
# Floors on the H200 are the datasheet figures: 4.8 TB/s HBM3e, 989 dense FP16 tensor TFLOP/s.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
pack=$repo/.tools/device-bench
mode=${1:-run}

if [ "$mode" = prepare ]; then
    set -e
    build=${BUILD_DIR:-$repo/build-bench}
    peer=${PEER_BUILD:-$repo/build-peer}
    rm -rf "$pack"
    mkdir -p "$pack/lib" "$pack/peer"
    cp "$build/deltallm" "$pack/"
    # The shared libraries of Debian 12 that the machine's Ubuntu lacks: fmt 9, ICU 72 (the
    # tokenizer's NFC normalization), cpp-httplib 0.11 (the server) and the brotli it links.
    for l in libfmt.so.9 libicuuc.so.72 libicudata.so.72 libcpp-httplib.so.0.11 \
        libbrotlidec.so.1 libbrotlienc.so.1 libbrotlicommon.so.1; do
        cp -L "/lib/x86_64-linux-gnu/$l" "$pack/lib/"
    done
    # NO_PEER=1: without llama.cpp's libraries (~9 MB of the pack), for calls that run no peer
    # benchmark (serving brings llama-server of its own), so more fits beside it.
    [ "${NO_PEER:-0}" = 1 ] || cp -a "$peer/vulkan/." "$pack/peer/"
    # The prebuilt libraries carry symbol tables: stripped, the pack stays under the 64 MiB limit
    # together with .gl (scripts/vk/fetch_gl.sh) and the tracked tree.
    strip --strip-unneeded "$pack/deltallm" "$pack"/peer/*.so 2>/dev/null || true
    # The built-in model (13.8 MB that xz barely shrinks) travels in the tree already: in the
    # pack's binary its bytes are zeros, which compress to nothing. On the GPU machine that binary
    # runs the benchmarks' files; the built-in model is given to it as -m models/*.gguf.
    python3 "$repo/scripts/bench/zero_builtin_model.py" "$pack/deltallm" \
        "$repo/models/deltallm-tiny-q8_0.gguf"
    mkdir -p "$repo/.devrun"
    tar -C "$repo/.tools" -cf - device-bench | xz -6 -T2 >"$repo/.devrun/device-bench.tar.xz"
    du -sh "$repo/.devrun/device-bench.tar.xz" "$repo/.gl"
    total=$(du -sbc "$repo/.devrun" "$repo/.gl" | tail -1 | cut -f1)
    # A call carries the tracked and untracked (not ignored) files too, 64 MiB in all; one of
    # 63.8 MiB by these bytes was refused, 62.2 went (2026-12-06): warn past 63.
    tree=$(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
        du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
    all=$(((total + tree) / 1048576))
    echo "carry: .gl .devrun = $((total / 1048576)) MiB, with the tree $all MiB (limit 64)"
    [ $((total + tree)) -le $((63 * 1048576)) ] ||
        echo "warning: near or over the 64 MiB a device call carries: drop what this call" \
            "does not need from .devrun/extra" >&2
    exit 0
fi

out=${OUT:-/tmp/device_bench_out}
mkdir -p "$out"
cd "$repo"
exec > >(tee "$out/log.txt") 2>&1
if [ -f .devrun/device-bench.tar.xz ]; then
    python3 -c "import tarfile; tarfile.open('.devrun/device-bench.tar.xz').extractall('.tools')"
fi
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export LD_LIBRARY_PATH=$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ours=$pack/deltallm
peer=$pack/peer/peer_bench
# PEER_DEVICE=cuda: llama.cpp's CUDA backend instead of its Vulkan build, compiled here first by
# scripts/bench/peer_cuda.sh (its source packed by `peer_cuda.sh prepare`).
peer_device=${PEER_DEVICE:-vulkan}
if [ "$peer_device" = cuda ]; then
    peer=$pack/peer-cuda/peer_bench
    echo "== llama.cpp CUDA build"
    bash scripts/bench/peer_cuda.sh build "$pack/peer-cuda" || exit 1
fi
models=${MODELS_DIR:-/tmp/models}
mkdir -p "$models"
# model_file arch:shape:type: sets name (arch-shape-type) and f (its file under $models),
# synthesizing the file first if it is not there yet.
model_file() {
    local arch shape type
    IFS=: read -r arch shape type <<<"$1"
    name=$arch-$shape-$type
    f=$models/$name.gguf
    [ -f "$f" ] || { echo "== synth $name"; "$ours" synth --arch "$arch" --shape "$shape" --type "$type" -o "$f" 2>&1 | tail -1; }
}
echo "== machine"; nproc; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv 2>&1 | head -3
"$ours" --version
# PEER_PROFILE="arch:shape:type ...": instead of the tables, each file's pp$PROFILE_PROMPT (default
# 512) once with llama.cpp's per-operation GPU timings (GGML_VK_PERF_LOGGER) and once with
# `deltallm bench --profile`, both logs in $OUT.
if [ -n "${PEER_PROFILE:-}" ]; then
    n=${PROFILE_PROMPT:-512}
    for spec in $PEER_PROFILE; do
        model_file "$spec"
        echo "== $name pp$n: llama.cpp per operation"
        GGML_VK_PERF_LOGGER=1 timeout 120 "$peer" -m "$f" --device vulkan -p "$n" -n 0 -r 1 \
            >"$out/peer-profile-$name-pp$n.txt" 2>&1
        echo "rc=$?"
        echo "== $name pp$n: deltallm --profile"
        timeout 120 "$ours" bench -m "$f" --device vulkan -p "$n" -n 0 -r 1 --profile \
            >"$out/ours-profile-$name-pp$n.txt" 2>&1
        echo "rc=$?"
    done
    ls -la "$out"
    exit 0
fi
# arch:shape:type of each file; the first two get more repetitions (they carry the PERF.md rows).
models_list=${MODELS:-"qwen35:0.8b:q4_k_m qwen35:9b:q4_k_m qwen35:0.8b:q8_0 qwen35:9b:q8_0 qwen3:8b:q4_k_m"}
floors=(--bw-gbps 4800 --peak-gflops 989000)
args=(--ours "$ours" --peer "$peer" --device vulkan --peer-device "$peer_device" "${floors[@]}")
[ "$models_list" = none ] && models_list=""
i=0
for spec in $models_list; do
    model_file "$spec"
    reps=(-r 3 --rounds 2)
    [ $i -ge 2 ] && reps=(-r 2 --rounds 1)
    echo "== $name: pp512 pp2048 tg128"
    timeout 150 python3 scripts/bench/compare.py "${args[@]}" -m "$f" -p 512,2048 -n 128 "${reps[@]}" \
        --md "$out/table-$name.md" --json "$out/table-$name.json" --csv "$out/table-$name.csv"
    echo "rc=$?"
    i=$((i + 1))
done
if [ "${SWEEP:-1}" != 0 ]; then
echo "== sweep 9b"
f=$models/qwen35-9b-q4_k_m.gguf
[ -f "$f" ] || f=$models/qwen35-0.8b-q4_k_m.gguf
timeout 150 python3 scripts/bench/compare.py "${args[@]}" -m "$f" --sweep -r 1 --rounds 1 \
    --md "$out/sweep.md" --csv "$out/sweep.csv"
echo "rc=$?"
fi
if [ -n "${DEPTHS:-}" ]; then
    depths=$(echo $DEPTHS | tr ' ' ,)
    for spec in qwen35:9b:q4_k_m qwen3:8b:q4_k_m; do
        model_file "$spec"
        echo "== $name: tg128 at depths $depths"
        timeout 300 python3 scripts/bench/compare.py "${args[@]}" -m "$f" -p 0 -n 128 -d "$depths" \
            -r 2 --rounds 1 --md "$out/table-depth-$name.md" --json "$out/table-depth-$name.json" \
            --csv "$out/table-depth-$name.csv"
        echo "rc=$?"
    done
fi
if [ -n "${BATCHES:-}" ]; then
    batches=$(echo $BATCHES | tr ' ' ,)
    for spec in ${BATCH_MODELS:-qwen35:9b:q4_k_m qwen35:0.8b:q4_k_m}; do
        model_file "$spec"
        echo "== $name: B $batches x pp512+tg128"
        timeout 300 python3 scripts/bench/compare.py "${args[@]}" -m "$f" -p 512 -n 128 -b "$batches" \
            -r 2 --rounds 1 --md "$out/batched-$name.md" --batched-json "$out/batched-$name.json" \
            --batched-csv "$out/batched-$name.csv"
        echo "rc=$?"
    done
fi
for c in "$out"/table-*.csv "$out/sweep.csv"; do
    [ -f "$c" ] && python3 scripts/bench/plot.py "$c" "${c%.csv}.png" || true
done
ls -la "$out"
