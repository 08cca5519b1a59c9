#!/usr/bin/env bash
# Installs the llama.cpp peer used by the benchmarks: prebuilt libraries from npm (CPU and Vulkan
# builds of node-llama-cpp 3.22.1) and only the public headers (llama.h and the ggml headers it
# includes) taken from the source bundle that node-llama-cpp ships. Nothing of llama.cpp is built.
# Usage: scripts/bench/setup_peer.sh [PEER_DIR]   (default: <repo>/.tools/peer, git-ignored)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
peer=${1:-$repo/.tools/peer}
version=3.22.1
mkdir -p "$peer/npm" "$peer/include"

if [ ! -f "$peer/npm/node_modules/node-llama-cpp/package.json" ] ||
   [ ! -d "$peer/npm/node_modules/@node-llama-cpp/linux-x64-vulkan" ] ||
   [ ! -d "$peer/npm/node_modules/@node-llama-cpp/linux-x64" ]; then
    # --ignore-scripts: node-llama-cpp's postinstall would try to download or build llama.cpp.
    (cd "$peer/npm" && [ -f package.json ] || echo '{"private":true}' > package.json)
    (cd "$peer/npm" && npm install --no-audit --no-fund --ignore-scripts \
        "node-llama-cpp@$version" "@node-llama-cpp/linux-x64-vulkan@$version" \
        "@node-llama-cpp/linux-x64@$version")
fi

bundle="$peer/npm/node_modules/node-llama-cpp/llama/gitRelease.bundle"
[ -f "$bundle" ] || { echo "setup_peer: $bundle is missing" >&2; exit 1; }
if [ ! -s "$peer/include/llama.h" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    git init -q "$tmp/src"
    # The bundle holds one head; fetch it under a name of our own and read files from it.
    git -C "$tmp/src" fetch -q "$bundle" HEAD:refs/heads/peer
    ref=refs/heads/peer
    git -C "$tmp/src" show "$ref:include/llama.h" > "$peer/include/llama.h"
    # The ggml headers llama.h includes, and the ones those include, one level at a time.
    todo="llama.h"
    while [ -n "$todo" ]; do
        next=""
        for h in $todo; do
            for inc in $(grep -oE '#include "[^"]+"' "$peer/include/$h" | sed -E 's/#include "(.*)"/\1/'); do
                [ -f "$peer/include/$inc" ] && continue
                if git -C "$tmp/src" show "$ref:ggml/include/$inc" > "$peer/include/$inc" 2>/dev/null; then
                    next="$next $inc"
                else
                    rm -f "$peer/include/$inc"
                fi
            done
        done
        todo=$next
    done
    git -C "$tmp/src" log -1 --format='%H %s' "$ref" > "$peer/include/SOURCE_COMMIT" || true
fi

# The libraries stay where npm put them; bench/CMakeLists.txt copies the ones it links next to
# each program (ggml finds its backend modules in the program's folder).
for pkg in linux-x64 linux-x64-vulkan; do
    d=$peer/npm/node_modules/@node-llama-cpp/$pkg/bins/$pkg
    ls "$d"/libllama*.so > /dev/null || { echo "setup_peer: no libllama in $d" >&2; exit 1; }
done
echo "setup_peer: headers in $peer/include; libraries under $peer/npm/node_modules/@node-llama-cpp"
ls "$peer/include"
