#!/usr/bin/env bash
# The batched engine on the GPU machine in one device call, under one deadline (DEADLINE seconds,
# default 560):
#   1. the whole Vulkan test binary (TEST_VULKAN, xz in .devrun/extra) under the Khronos
#      validation layer, first, so that the numbers after it come from kernels checked on this
#      device (at most VALIDATION_SECONDS, default 200)
#   2. a sweep of `deltallm bench -b B -p 512 -n N --profile` on Qwen3.5-9B Q4_K_M for each B of
#      BATCHES and each DELTALLM_VK_GEMM_GEMV_ROWS of GEMV_ROWS (which GEMMs run as the batched
#      GEMV), with the profile's GPU time per role of the batch command
#   3. with BEFORE carried, that build and ours alternating on the same rows
#   4. ours against llama.cpp (Vulkan, through llama.h) on the batched rows, same file
# Here: scripts/bench/device_bench.sh prepare, xz the test binary to .devrun/extra/test_vulkan.xz;
# carry .gl and .devrun.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
out=${OUT:-/tmp/device_batched_out}
source scripts/bench/device_common.sh
[ -f .devrun/extra/test_vulkan.xz ] && xz -dc .devrun/extra/test_vulkan.xz >/tmp/test_vulkan &&
    chmod +x /tmp/test_vulkan

if [ -x /tmp/test_vulkan ] && fits 300 "the Vulkan tests under the validation layer"; then
    VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation DELTALLM_VK_VALIDATION=1 DELTALLM_TEST_TMP=/tmp \
        DELTALLM_TEST_DATA=$repo/tests/data DELTALLM_BIN=$ours timeout ${VALIDATION_SECONDS:-200} /tmp/test_vulkan --gtest_brief=1 \
        --gtest_filter="${VALIDATION_FILTER:-*}" >"$out/validation.log" 2>&1
    echo "rc=$? validation errors: $(grep -c 'Validation Error' "$out/validation.log")"
    grep -E '^\[  FAILED|Failure$' "$out/validation.log" | sort -u | head -20
    tail -4 "$out/validation.log"
    grep -m3 'Validation Error' "$out/validation.log" | cut -c1-300
fi

m9=/tmp/qwen35-9b-q4_k_m.gguf
"$ours" synth --arch qwen35 --shape 9b --type q4_k_m -o "$m9" 2>&1 | tail -1

n=${GEN:-64}
for rows in ${GEMV_ROWS:-0 32 64}; do
    for b in ${BATCHES:-8 16 32 64}; do
        fits 30 "B=$b, GEMM_GEMV_ROWS=$rows" || break 2
        DELTALLM_VK_GEMM_GEMV_ROWS=$rows timeout 90 "$ours" bench -m "$m9" --device vulkan \
            -b "$b" -p 512 -n "$n" -r 1 --profile -o csv >"$out/b$b-rows$rows.csv" 2>"$out/b$b-rows$rows.err"
        grep -i "B$b" "$out/b$b-rows$rows.csv" | tail -1
        grep -A12 "profile, batch" "$out/b$b-rows$rows.err" | head -14
    done
done

# BEFORE (xz in .devrun/extra/deltallm-before.xz, a build of an earlier commit): both binaries
# alternating on the batched rows, for an optimisation's before and after in one call. Build it
# with scripts/build.sh: a plain CMake build lacks the cooperative-matrix shaders (they need the
# newer glslc that script sets up), and its scalar prefill of B x 512 tokens outlasts the stage's
# timeout (2026-12-05: the earlier build printed no row).
if [ -f .devrun/extra/deltallm-before.xz ] && fits 90 "before/after"; then
    xz -dc .devrun/extra/deltallm-before.xz >/tmp/deltallm-before && chmod +x /tmp/deltallm-before
    for b in ${BATCHES:-8 16 32 64}; do
        for bin in /tmp/deltallm-before "$ours" /tmp/deltallm-before "$ours"; do
            printf '%s B=%s: ' "$(basename "$bin")" "$b"
            timeout 60 "$bin" bench -m "$m9" --device vulkan -b "$b" -p 512 -n "$n" -r 1 -o csv \
                2>/dev/null | grep -i "B$b" | tail -1
        done
    done | tee "$out/before-after.txt"
fi

floors=(--bw-gbps 4800 --peak-gflops 989000)
if fits 150 "batched against llama.cpp"; then
    timeout 240 python3 scripts/bench/compare.py --ours "$ours" --peer "$peer" --device vulkan \
        "${floors[@]}" -m "$m9" -p 512 -n 128 -b "${COMPARE_BATCHES:-1,8,16,32,64}" -r 1 --rounds 1 \
        --md "$out/batched.md" --batched-json "$out/batched.json" >/dev/null
    cat "$out/batched.md"
fi

echo "== done at $SECONDS s"
