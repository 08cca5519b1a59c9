#!/usr/bin/env bash
# The deltallm binary of an older commit, for device_round.sh's bisect stage:
#   scripts/bench/build_at.sh <commit> [...]
# builds each commit from a worktree in /tmp (with this checkout's .tools linked in, so its
# shaders are built by the same glslc, cooperative-matrix variants included: the system's
# glslc builds none and would mislead), strips it, zeroes its built-in model as
# device_bench.sh prepare does, and writes .devrun/extra/deltallm-<short commit>.xz.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
for c in "$@"; do
    short=$(git -C "$repo" rev-parse --short=7 "$c")
    wt=/tmp/deltallm-at-$short
    [ -d "$wt" ] || git -C "$repo" worktree add --detach "$wt" "$short" >/dev/null
    [ -e "$wt/.tools" ] || ln -s "$repo/.tools" "$wt/.tools"
    cmake -S "$wt" -B "$wt/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
    cmake --build "$wt/build" --target deltallm >/dev/null
    strip -o "/tmp/deltallm-$short" "$wt/build/deltallm"
    python3 "$repo/scripts/bench/zero_builtin_model.py" "/tmp/deltallm-$short" \
        "$wt/models/deltallm-tiny-q8_0.gguf"
    mkdir -p "$repo/.devrun/extra"
    xz -6 -T2 -c "/tmp/deltallm-$short" >"$repo/.devrun/extra/deltallm-$short.xz"
    ls -la "$repo/.devrun/extra/deltallm-$short.xz"
done
