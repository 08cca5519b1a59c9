#!/usr/bin/env bash
# The batched GEMV's forms on the GPU machine in one short device call (DEADLINE seconds, default
# 220): `deltallm bench -b B -p 16 -n N` on Qwen3.5-9B Q4_K_M for each B of BATCHES under each
# FORMS entry "once:rows" (DELTALLM_VK_GEMV_BATCH_ONCE, DELTALLM_VK_GEMV_BATCH_ROWS), the batch
# profile's GEMM time beside each; then, with time left, the whole Vulkan test binary
# (TEST_VULKAN, xz in .devrun/extra) without the validation layer, failures listed.
# Here: scripts/bench/device_bench.sh prepare; carry .gl and .devrun.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
out=${OUT:-/tmp/device_gemv_batch_out}
DEADLINE=${DEADLINE:-220}
source scripts/bench/device_common.sh
m9=/tmp/qwen35-9b-q4_k_m.gguf
"$ours" synth --arch qwen35 --shape 9b --type q4_k_m -o "$m9" 2>&1 | tail -1
n=${GEN:-32}
for b in ${BATCHES:-8 32}; do
    for form in ${FORMS:-0:0 1:0 1:2 1:1 0:1}; do
        fits 25 "B=$b once:rows $form" || break 2
        printf 'B=%s once:rows=%s ' "$b" "$form"
        DELTALLM_VK_GEMV_BATCH_ONCE=${form%:*} DELTALLM_VK_GEMV_BATCH_ROWS=${form#*:} \
            timeout 40 "$ours" bench -m "$m9" --device vulkan -b "$b" -p 16 -n "$n" -r 1 \
            --profile -o csv 2>"$out/err-$b-${form/:/-}.txt" | grep "B$b " | cut -d, -f4,9 | tr '\n' ' '
        grep -m1 -A1 "profile, batch" "$out/err-$b-${form/:/-}.txt" | tail -1
    done
done | tee "$out/gemv-batch.txt"
[ -f .devrun/extra/test_vulkan.xz ] && xz -dc .devrun/extra/test_vulkan.xz >/tmp/test_vulkan &&
    chmod +x /tmp/test_vulkan
if [ -x /tmp/test_vulkan ] && fits 40 "the Vulkan tests"; then
    DELTALLM_TEST_TMP=/tmp DELTALLM_TEST_DATA=$repo/tests/data DELTALLM_BIN=$ours \
        timeout $(($(left) - 5)) /tmp/test_vulkan --gtest_brief=1 >"$out/tests.log" 2>&1
    echo "rc=$? (124: cut at the deadline)"
    grep -E '^\[  FAILED|^\[  PASSED|tests? ran' "$out/tests.log" | sort -u | head -20
fi
echo "== done at $SECONDS s"
