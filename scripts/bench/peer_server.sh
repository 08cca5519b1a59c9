#!/usr/bin/env bash
# llama-server, llama.cpp's OpenAI-compatible server with its Vulkan backend, as the serving peer
# of scripts/bench/serve_bench.py on the GPU machine. Benchmark only: nothing of it enters the
# repository; the source travels in the git-ignored .devrun folder and is built under /tmp there.
#
# Here:  scripts/bench/peer_server.sh prepare
#          writes .devrun/peer-server-src.tar.xz: the release node-llama-cpp ships as a git bundle
#          (the one every other peer number comes from; scripts/bench/setup_peer.sh), with
#          Debian 13's glslc and its C library (it knows the cooperative-matrix extensions), the
#          Vulkan headers beside it and the SPIR-V headers ggml-vulkan includes (about 14 MB).
# There: scripts/bench/peer_server.sh build [DEST]
#          builds llama-server against the machine's Vulkan loader (.gl, unpacked first) into
#          DEST (default /tmp/peer-server) with all its cores, and leaves
#          DEST/llama-server.tar.xz (the binary and its libraries) for a later call to carry.
#        scripts/bench/peer_server.sh unpack ARCHIVE [DEST]
#          unpacks such an archive again.
# Or here: scripts/bench/peer_server.sh pack [DEST]
#          builds it here at low priority (JOBS, default 2) and writes .devrun/extra/llama-server.tar.xz
#          (one binary; it needs only the C and C++ runtimes and the machine's libvulkan.so.1), which
#          device_round.sh and device_serve.sh unpack instead of building there.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:-build}

if [ "$mode" = prepare ]; then
    bundle=$repo/.tools/peer/npm/node_modules/node-llama-cpp/llama/gitRelease.bundle
    trixie=$repo/.tools/trixie
    [ -f "$bundle" ] || { echo "peer_server: $bundle is missing: run scripts/bench/setup_peer.sh" >&2; exit 1; }
    [ -x "$trixie/usr/bin/glslc" ] || { echo "peer_server: no $trixie/usr/bin/glslc: run scripts/setup.sh" >&2; exit 1; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    git init -q "$tmp/git"
    git -C "$tmp/git" fetch -q "$bundle" HEAD:refs/heads/peer
    mkdir -p "$tmp/pack/src" "$tmp/pack/glslc/lib" "$tmp/pack/include" "$tmp/spv"
    git -C "$tmp/git" archive refs/heads/peer CMakeLists.txt cmake ggml src include vendor common \
        tools scripts/ui-assets.cmake LICENSE | tar -x -C "$tmp/pack/src"
    # The web UI's sources and tests: the server is built without its UI (no npm there).
    rm -rf "$tmp/pack/src/tools/ui/src" "$tmp/pack/src/tools/ui/tests" "$tmp/pack/src/tools/ui/package-lock.json"
    git -C "$tmp/git" log -1 --format='%H' refs/heads/peer >"$tmp/pack/src/SOURCE_COMMIT"
    lib=$trixie/usr/lib/x86_64-linux-gnu
    cp "$trixie/usr/bin/glslc" "$tmp/pack/glslc/"
    cp -L "$lib"/{ld-linux-x86-64.so.2,libc.so.6,libm.so.6,libstdc++.so.6,libgcc_s.so.1,libshaderc.so.1} \
        "$tmp/pack/glslc/lib/"
    cp -a "$trixie/usr/include/vulkan" "$trixie/usr/include/vk_video" "$tmp/pack/include/"
    # The SPIR-V headers: trixie's package, fetched through a private sources list.
    mkdir -p "$tmp/apt/lists/partial" "$tmp/apt/cache/archives/partial"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
        >"$tmp/apt/sources.list"
    o=(-o "Dir::Etc::SourceList=$tmp/apt/sources.list" -o "Dir::Etc::SourceParts=$tmp/apt/none"
       -o "Dir::State::Lists=$tmp/apt/lists" -o "Dir::Cache=$tmp/apt/cache"
       -o "APT::Architecture=amd64" -o "APT::Architectures=amd64" -o "Debug::NoLocking=1")
    apt-get "${o[@]}" -qq update >/dev/null
    (cd "$tmp/spv" && apt-get "${o[@]}" -qq download spirv-headers 2>/dev/null)
    dpkg -x "$tmp"/spv/spirv-headers_*.deb "$tmp/spv/x"
    cp -a "$tmp/spv/x/usr" "$tmp/pack/spirv"
    mkdir -p "$repo/.devrun"
    tar -C "$tmp/pack" -cf - . | xz -6 -T2 >"$repo/.devrun/peer-server-src.tar.xz"
    du -sh "$repo/.devrun/peer-server-src.tar.xz"
    exit 0
fi

if [ "$mode" = pack ]; then
    dest=${2:-/tmp/ps}
    JOBS=${JOBS:-2} nice -n 19 bash "$0" build "$dest" || exit 1
    # Only what our own binary already needs there may come from the machine (the C and C++
    # runtimes up to glibc 2.34 and GCC 12's libstdc++) besides its Vulkan loader.
    needed=$(objdump -p "$dest/llama-server" | awk '/NEEDED/ {print $2}')
    other=$(echo "$needed" | grep -vxE 'libvulkan\.so\.1|lib(c|m|stdc\+\+)\.so\.6|libgcc_s\.so\.1|ld-linux-x86-64\.so\.2' || true)
    [ -z "$other" ] || { echo "peer_server: llama-server needs $other" >&2; exit 1; }
    vers=$(objdump -T "$dest/llama-server" | grep -oE '(GLIBC|GLIBCXX|CXXABI)_[0-9.]+' | sort -uV)
    newer=$(echo "$vers" | grep -vE '^GLIBC_2\.([0-9]|[12][0-9]|3[0-4])(\.|$)|^GLIBCXX_3\.4(\.([0-9]|[12][0-9]|30))?$|^CXXABI_1\.3(\.([0-9]|1[0-3]))?$' || true)
    [ -z "$newer" ] || { echo "peer_server: llama-server needs" $newer >&2; exit 1; }
    echo "needs:" $needed "(up to $(echo "$vers" | grep ^GLIBC_ | tail -1), $(echo "$vers" | grep ^GLIBCXX | tail -1))"
    mkdir -p "$repo/.devrun/extra"
    # The strongest xz: the archive counts against what a device call can carry.
    tar -C "$dest" -cf - llama-server | nice -n 19 xz -9e -T1 >"$repo/.devrun/extra/llama-server.tar.xz"
    du -sh "$repo/.devrun/extra/llama-server.tar.xz"
    exit 0
fi

if [ "$mode" = unpack ]; then
    dest=${3:-/tmp/peer-server}
    mkdir -p "$dest"
    tar -C "$dest" -xJf "$2"
    "$dest/llama-server" --version 2>&1 | tail -2
    exit 0
fi

dest=${2:-/tmp/peer-server}
work=${PEER_SERVER_WORK:-/tmp/peer-server-work}
[ -f "$repo/.devrun/peer-server-src.tar.xz" ] ||
    { echo "peer_server: no .devrun/peer-server-src.tar.xz: run '$0 prepare' here" >&2; exit 1; }
mkdir -p "$work" "$dest"
[ -f "$work/src/CMakeLists.txt" ] || tar -C "$work" -xJf "$repo/.devrun/peer-server-src.tar.xz"
# glslc runs through its own dynamic loader: the machine's C library is older than it needs.
cat >"$work/glslc.sh" <<EOF
#!/bin/sh
exec "$work/glslc/lib/ld-linux-x86-64.so.2" --library-path "$work/glslc/lib" "$work/glslc/glslc" "\$@"
EOF
chmod +x "$work/glslc.sh"
vklib=$(ls /usr/lib/x86_64-linux-gnu/libvulkan.so.1* 2>/dev/null | head -1)
[ -n "$vklib" ] || { echo "peer_server: no libvulkan.so.1: unpack .gl first" >&2; exit 1; }
t0=$SECONDS
# ggml and llama linked in and no OpenMP (the GPU does the work; the CPU code keeps ggml's own
# threads): one binary. AVX2 at most. The C++ runtime stays the machine's: linked in, it would call
# glibc 2.35 and 2.36 functions (arc4random, _dl_find_object) that an older C library lacks.
cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_VULKAN=ON -DGGML_NATIVE=OFF -DGGML_CCACHE=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DGGML_OPENMP=OFF \
    -DVulkan_INCLUDE_DIR="$work/include" -DVulkan_LIBRARY="$vklib" \
    -DVulkan_GLSLC_EXECUTABLE="$work/glslc.sh" -DSPIRV-Headers_DIR="$work/spirv/share/cmake/SPIRV-Headers" \
    -DCMAKE_CXX_FLAGS="-I$work/include -I$work/spirv/include" \
    >"$work/cmake.log" 2>&1 || { tail -40 "$work/cmake.log"; exit 1; }
cmake --build "$work/build" --target llama-server -j "${JOBS:-$(nproc)}" >"$work/build.log" 2>&1 ||
    { grep -m5 -B2 -A8 "error" "$work/build.log" | head -60; tail -20 "$work/build.log"; exit 1; }
cp "$work/build/bin/llama-server" "$dest/"
strip "$dest/llama-server"
tar -C "$dest" -cf - llama-server | xz -6 -T0 >"$dest/llama-server.tar.xz"
ls -la "$dest"
echo "peer_server: built llama-server $(cat "$work/src/SOURCE_COMMIT") in $((SECONDS - t0)) s"
