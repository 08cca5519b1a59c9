#!/usr/bin/env bash
# Installs what is needed, builds (and the shaders with the system's glslc), and runs every test
# under CTest (and the bounded fuzz run).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bash "$here/scripts/setup.sh"
bash "$here/scripts/build.sh"
# The shaders once more with Debian 12's own glslc, when it is there: a build without the newer
# compiler must leave out only what that compiler cannot build (cmake/vulkan.cmake).
if [ -x /usr/bin/glslc ]; then
  sys="${BUILD_DIR:-$here/build}-system-glslc"
  cmake -S "$here" -B "$sys" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELTALLM_GLSLC=/usr/bin/glslc \
    ${CMAKE_ARGS:-} >/dev/null
  cmake --build "$sys" -j "${JOBS:-$(nproc)}" --target deltallm_vk_shaders
fi
cd "${BUILD_DIR:-$here/build}"
ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 900
bash "$here/scripts/fuzz.sh"
