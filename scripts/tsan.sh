#!/usr/bin/env bash
# ThreadSanitizer over the threaded parts: the CPU chain's thread pool (test_cpu), the scheduler
# and prefix cache (test_engine), and the real server under 32 concurrent clients
# (tests/server/e2e/load_test.py; its clients may time out under the sanitizer's slowdown, which
# is not what this looks for). Prints each report's first lines and exits 1 if there was any.
#   bash scripts/tsan.sh [BUILD_DIR]   (default /tmp/build-tsan; the CPU build only)
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-/tmp/build-tsan}
logs=$build/tsan-logs
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDELTALLM_VULKAN=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null || exit 1
ninja -C "$build" -j"${JOBS:-2}" deltallm test_cpu test_engine || exit 1
rm -rf "$logs" && mkdir -p "$logs"
export TSAN_OPTIONS="log_path=$logs/report halt_on_error=0"
export DELTALLM_THREADS=${DELTALLM_THREADS:-2}
"$build/tests/test_cpu" --gtest_brief=1 | tail -2
"$build/tests/test_engine" --gtest_brief=1 | tail -2
(cd "$repo/tests/server/e2e" && timeout 900 python3 load_test.py "$build/deltallm" | tail -3)
reports=$(cat "$logs"/report* 2>/dev/null | grep -c '^WARNING: ThreadSanitizer\|^==.*ERROR: ThreadSanitizer')
echo "ThreadSanitizer reports: $reports"
[ "$reports" -eq 0 ] || { grep -h -A8 'ThreadSanitizer' "$logs"/report* | head -60; exit 1; }
