#!/usr/bin/env bash
# Installs what is needed, builds the deltallm binary, and generates text with the built-in model,
# deltallm-tiny (extra arguments go to `deltallm run`, e.g. -m MODEL.gguf -p "prompt" -n 64).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build}
bash "$here/scripts/setup.sh"
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} ${CMAKE_ARGS:-} >/dev/null
# Only the binary: the tests are scripts/test.sh's business.
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target deltallm
# A prompt of the caller's replaces the default one.
prompt=(-p "${PROMPT:-Once upon a time}")
for a in "$@"; do
  case "$a" in -p|--prompt|-f|--file|--prompt-ids) prompt=() ;; esac
done
"$build/deltallm" run "${prompt[@]}" -n 32 "$@"
