#!/usr/bin/env bash
# llama.cpp's CUDA backend as a second peer on an NVIDIA GPU machine: the vendor's own backend,
# beside the Vulkan build the comparisons are made against.
#
# node-llama-cpp's prebuilt CUDA library cannot serve here: its PTX for sm_90 comes from a newer
# CUDA than the H200 machine's driver (580, CUDA 13.0) accepts ("the provided PTX was compiled
# with an unsupported toolchain"), and it has no sm_90 machine code. So the same llama.cpp release
# is compiled there, from the source bundle node-llama-cpp ships (the one the Vulkan and CPU
# libraries were built from), for the machine's own architecture only. Nothing of it enters the
# repository: the source travels in the git-ignored .devrun folder and is built under /tmp.
#
# Here:  scripts/bench/peer_cuda.sh prepare
#          writes .devrun/peer-cuda-src.tar.xz (the library's build inputs and bench/peer_bench.cpp;
#          about 4 MB) from the bundle under .tools/peer (scripts/bench/setup_peer.sh).
# There: scripts/bench/peer_cuda.sh build [DEST]
#          builds libllama with GGML_CUDA for CUDA_ARCH (default 90) and peer_bench against it into
#          DEST (default .tools/device-bench/peer-cuda); a second call on a machine still held
#          rebuilds nothing. scripts/bench/device_bench.sh with PEER_DEVICE=cuda calls it. The
#          build takes about 4 minutes on the H200 machine's 16 cores: on a fresh machine, build in
#          a call of its own and compare in the next while the machine is still held.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:-build}

if [ "$mode" = prepare ]; then
    bundle=$repo/.tools/peer/npm/node_modules/node-llama-cpp/llama/gitRelease.bundle
    [ -f "$bundle" ] || { echo "peer_cuda: $bundle is missing: run scripts/bench/setup_peer.sh" >&2; exit 1; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    git init -q "$tmp/git"
    git -C "$tmp/git" fetch -q "$bundle" HEAD:refs/heads/peer
    mkdir -p "$tmp/pack/src" "$tmp/pack/bench"
    # What libllama and its ggml backends build from; no tools, tests or examples.
    git -C "$tmp/git" archive refs/heads/peer CMakeLists.txt cmake ggml src include vendor common \
        LICENSE | tar -x -C "$tmp/pack/src"
    git -C "$tmp/git" log -1 --format='%H' refs/heads/peer >"$tmp/pack/src/SOURCE_COMMIT"
    cp "$repo/bench/peer_bench.cpp" "$tmp/pack/bench/"
    mkdir -p "$repo/.devrun"
    tar -C "$tmp/pack" -cf - . | xz -6 -T2 >"$repo/.devrun/peer-cuda-src.tar.xz"
    du -sh "$repo/.devrun/peer-cuda-src.tar.xz"
    exit 0
fi

dest=${2:-$repo/.tools/device-bench/peer-cuda}
work=${PEER_CUDA_WORK:-/tmp/peer-cuda}
arch=${CUDA_ARCH:-90}
if [ -x "$dest/peer_bench" ]; then
    echo "peer_cuda: $dest/peer_bench is there"
    exit 0
fi
[ -f "$repo/.devrun/peer-cuda-src.tar.xz" ] ||
    { echo "peer_cuda: no .devrun/peer-cuda-src.tar.xz: run 'scripts/bench/peer_cuda.sh prepare' here" >&2; exit 1; }
mkdir -p "$work"
[ -f "$work/src/CMakeLists.txt" ] || tar -C "$work" -xJf "$repo/.devrun/peer-cuda-src.tar.xz"
command -v nvcc >/dev/null || export PATH=$PATH:/usr/local/cuda/bin
t0=$SECONDS
# llama.cpp's own defaults otherwise (CUDA graphs on, flash attention kernels for the default
# cache types); GGML_NATIVE off as in a release build.
cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DGGML_NATIVE=OFF -DGGML_CCACHE=OFF \
    -DGGML_CUDA_NCCL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF >"$work/cmake.log" 2>&1 || { tail -30 "$work/cmake.log"; exit 1; }
cmake --build "$work/build" --target llama -j "$(nproc)" >"$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log"; exit 1; }
mkdir -p "$dest"
cp -a "$work/build/bin/"*.so* "$dest/"
g++ -O2 -std=c++17 -I"$work/src/include" -I"$work/src/ggml/include" "$work/bench/peer_bench.cpp" \
    -L"$dest" -lllama -lggml -lggml-base -Wl,-rpath,'$ORIGIN' -o "$dest/peer_bench"
echo "peer_cuda: built llama.cpp $(cat "$work/src/SOURCE_COMMIT") for sm_$arch in $((SECONDS - t0)) s"
