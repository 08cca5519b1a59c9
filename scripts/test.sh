#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test under CTest (and the bounded fuzz run).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bash "$here/scripts/setup.sh"
bash "$here/scripts/build.sh"
cd "${BUILD_DIR:-$here/build}"
ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 900
bash "$here/scripts/fuzz.sh"
