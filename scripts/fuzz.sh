#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (into build-fuzz/, FUZZ_BUILD_DIR overrides) and runs
# them for a bounded time: gguf_fuzz for FUZZ_SECONDS (default 60), safetensors_fuzz and
# convert_config_fuzz (convert's config.json and tokenizer.json) for a quarter of that each. Exits non-zero when a target crashes, leaks or times out on an input; the
# input that did it is left in the build folder (crash-*, leak-*, timeout-*).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$here/build-fuzz}
seconds=${FUZZ_SECONDS:-60}
jobs=${JOBS:-$(nproc)}

CC=clang CXX=clang++ cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDELTALLM_FUZZ=ON -DDELTALLM_TESTS=OFF -DDELTALLM_VULKAN=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target gguf_fuzz safetensors_fuzz convert_config_fuzz

run() {  # target, seconds, committed seed folder
  local target=$1 secs=$2 seeds=$3
  local corpus="$build/corpus/$target"
  mkdir -p "$corpus"
  echo "fuzz: $target for ${secs}s"
  # New inputs go to the scratch corpus; the committed seeds are only read.
  (cd "$build" && "./fuzz/$target" -max_total_time="$secs" -max_len=65536 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 "$corpus" "$seeds" 2>"$build/$target.log") || {
    tail -n 60 "$build/$target.log"
    echo "fuzz: $target failed (log: $build/$target.log)" >&2
    return 1
  }
  grep -E "stat::number_of_executed_units|cov:" "$build/$target.log" | tail -n 2 || true
}

run gguf_fuzz "$seconds" "$here/fuzz/corpus/gguf"
run safetensors_fuzz "$(( seconds / 4 > 0 ? seconds / 4 : 1 ))" "$here/fuzz/corpus/safetensors"
run convert_config_fuzz "$(( seconds / 4 > 0 ? seconds / 4 : 1 ))" "$here/fuzz/corpus/convert_config"
