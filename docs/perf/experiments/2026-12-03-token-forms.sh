#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-03 (evening)": the token's tiled GEMV stages in their own forms and with
# their parts taken away one at a time (GemvSpeed.TokenForms), with what the driver's compiler
# reports of each kernel (registers); the same report of the kernels the 9B's token runs; then
# the FFN pair in half tiles in the token (2026-12-03-pair-half.patch: DLX_PAIR_HALF=S, a
# workgroup 16 rows of each matrix over S slots a matrix), greedy tokens and profiles A/B.
# Device: one call carrying .gl and .devrun on the packed binaries of
# `scripts/vk/device_reports.sh prepare` (built with the patch).
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-pair-half.patch > 2026-12-03-pair-half.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9"
DELTALLM_VK_SPEED=1 DELTALLM_VK_KERNEL_STATS=1 DELTALLM_LOG=info $T --gtest_brief=1 \
    --gtest_filter='GemvSpeed.TokenForms' 2>&1 |
    grep -E "token form|kernel gemv_tile|PASSED|FAILED|Failure|row " | sed 's/  */ /g'
echo "[q9 token kernels]"
DELTALLM_VK_KERNEL_STATS=1 DELTALLM_LOG=info $B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 4 -r 1 2>&1 |
    grep -E "kernel (gemv_tile|deltanet_step|attn_decode)" | sed 's/  */ /g' | sort -u
for m in q9; do
    for c in DLX_NONE=1 DLX_PAIR_HALF=8; do
        echo "[$m] $c greedy: $(env $c $B run -m /tmp/$m.gguf --device vulkan -p 'The quick brown fox' -n 24 --temp 0 2>/dev/null | od -An -tx1 | md5sum)"
    done
    for c in DLX_NONE=1 DLX_PAIR_HALF=8 DLX_NONE=1 DLX_PAIR_HALF=8; do
        echo "[$m] $c: $(prof $m $c)"
    done
done
