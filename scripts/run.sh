#!/usr/bin/env bash
# Installs what is needed, builds, and generates text with the embedded default model
# (extra arguments go to `deltallm run`).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bash "$here/scripts/setup.sh"
bash "$here/scripts/build.sh"
"${BUILD_DIR:-$here/build}/deltallm" run -p "${PROMPT:-Once upon a time}" -n 32 "$@"
