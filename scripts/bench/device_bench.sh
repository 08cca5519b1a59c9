#!/usr/bin/env bash
# deltallm vs llama.cpp (Vulkan) on the GPU machine in one device call.
#
# Here (prepare): builds nothing new; packs what the device needs into .tools/device-bench
# (git-ignored): our deltallm binary and the libfmt it links (Ubuntu has no libfmt.so.9), and the
# Vulkan peer program with only the prebuilt libraries it loads. Prints the size to carry.
#   scripts/bench/device_bench.sh prepare [BUILD_DIR=build-bench] [PEER_BUILD=build-peer]
# There (run): one device call, carrying ".gl" and ".tools/device-bench":
#   [SHAPES="0.8b 9b"] [SWEEP=0] scripts/bench/device_bench.sh run
# unpacks the Vulkan loader, synthesizes the model files on the device, checks llama.cpp loads
# them, runs both engines alternating (pp512, pp2048, tg128), a prompt sweep 128..8192 and writes
# the tables, JSON, CSV (and PNG when matplotlib is there; else plot.py draws it here) to $OUT.
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
    cp -L /lib/x86_64-linux-gnu/libfmt.so.9 "$pack/lib/"
    cp -a "$peer/vulkan/." "$pack/peer/"
    # The prebuilt libraries carry symbol tables: stripped, the pack stays under the 64 MiB limit
    # together with .gl (scripts/vk/fetch_gl.sh) and the tracked tree.
    strip --strip-unneeded "$pack/deltallm" "$pack"/peer/*.so 2>/dev/null || true
    du -sh "$pack" "$repo/.gl"
    total=$(du -sbc "$pack" "$repo/.gl" | tail -1 | cut -f1)
    echo "carry: .gl .tools/device-bench = $((total / 1048576)) MiB (limit 64 MiB)"
    [ "$total" -lt $((64 * 1048576)) ] || { echo "device_bench: too large to carry" >&2; exit 1; }
    exit 0
fi

out=${OUT:-/tmp/device_bench_out}
mkdir -p "$out"
cd "$repo"
exec > >(tee "$out/log.txt") 2>&1
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export LD_LIBRARY_PATH=$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ours=$pack/deltallm
peer=$pack/peer/peer_bench
models=${MODELS_DIR:-/tmp/models}
mkdir -p "$models"
echo "== machine"; nproc; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv 2>&1 | head -3
"$ours" --version
for shape in ${SHAPES:-0.8b 9b}; do
    f=$models/qwen35-$shape-q4_k_m.gguf
    [ -f "$f" ] || { echo "== synth $shape"; time "$ours" synth --arch qwen35 --shape "$shape" -t q4_k_m -o "$f"; }
done
floors=(--bw-gbps 4800 --peak-gflops 989000)
args=(--ours "$ours" --peer "$peer" --device vulkan "${floors[@]}")
for shape in ${SHAPES:-0.8b 9b}; do
    f=$models/qwen35-$shape-q4_k_m.gguf
    echo "== $shape: pp512 pp2048 tg128"
    timeout $([ "$shape" = 9b ] && echo 180 || echo 120) python3 scripts/bench/compare.py "${args[@]}" -m "$f" -p 512,2048 -n 128 -r 3 --rounds 2 \
        --md "$out/table-$shape.md" --json "$out/table-$shape.json" --csv "$out/table-$shape.csv"
    echo "rc=$?"
done
if [ "${SWEEP:-1}" != 0 ]; then
echo "== sweep 9b"
f=$models/qwen35-9b-q4_k_m.gguf
[ -f "$f" ] || f=$models/qwen35-0.8b-q4_k_m.gguf
timeout 150 python3 scripts/bench/compare.py "${args[@]}" -m "$f" --sweep -r 2 --rounds 1 \
    --md "$out/sweep.md" --csv "$out/sweep.csv"
echo "rc=$?"
fi
for c in "$out"/table-*.csv "$out/sweep.csv"; do
    [ -f "$c" ] && python3 scripts/bench/plot.py "$c" "${c%.csv}.png" || true
done
ls -la "$out"
