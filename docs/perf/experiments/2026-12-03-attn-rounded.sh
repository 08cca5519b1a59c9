#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-03 (later)": the decode attention rounds its output to bytes for the
# output projection (DELTALLM_VK_ATTN_ROUNDED=1, the default) against the projection's
# workgroups rounding the floats (0): greedy tokens (the same bytes either way), the decode
# profile and tg128 on the 9B (8 attention layers of 32) and Qwen3-8B (36 of 36); then the
# attention, decode fusion and shared-memory tests under the Khronos validation layer.
# With SMEM=1 first StageSpeed.Chain with more shared memory in some rounds
# (2026-12-03-smem-switch.patch: stage_chain.comp holds PAD more floats; DLX_CHAIN_PAD=P runs the
# chain of dispatches and barriers with the rounds' pads 0/0, P/P, 0/16, 0/P, P/2 / P, 0/0
# alternating). Both patches apply to caf91e1.
# Device: one call carrying .gl and .devrun on the packed binaries of
# `scripts/vk/device_reports.sh prepare`.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-dn-early.patch > 2026-12-03-dn-early.patch
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-smem-switch.patch > 2026-12-03-smem-switch.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen3 8b q3"
if [ "${SMEM:-0}" = 1 ]; then
    for P in 10240 4096; do
        DLX_CHAIN_PAD=$P DELTALLM_VK_SPEED=1 $T --gtest_brief=1 --gtest_filter='StageSpeed.Chain' 2>&1 | grep -E "DLX|round|FAIL"
    done
fi
for c in 1 0; do
    for m in q9 q3; do echo "[$m] rounded $c greedy: $(DELTALLM_VK_ATTN_ROUNDED=$c $B run -m /tmp/$m.gguf --device vulkan -p 'The quick brown fox' -n 24 --temp 0 2>/dev/null | od -An -tx1 | md5sum)"; done
done
for m in q9 q3; do
    for c in 1 0 1 0; do echo "[$m] rounded $c: $(prof $m DELTALLM_VK_ATTN_ROUNDED=$c)"; done
done
for r in 1 2; do
    for m in q9 q3; do
        for c in 1 0; do echo "[$m] tg128 rounded $c: $(tgb $m DELTALLM_VK_ATTN_ROUNDED=$c)"; done
    done
done
DELTALLM_VK_TEST_ROBUST=0 PARTS=suite OUT=${OUT:-/tmp} \
    FILTER='*Attention*:*DecodeFusion*:SpirvShared*:*VulkanDriver.*' \
    timeout 200 bash scripts/vk/device_reports.sh run 2>&1 | grep -E "suite rc|validation messages|PASSED|FAILED"
# With DN=1: the DeltaNet step's state values and gate inputs requested at the top
# (2026-12-03-dn-early.patch, DLX_DN_EARLY=1) against as is, A/B in this call.
if [ "${DN:-0}" = 1 ]; then
    for m in q9; do
        echo "[$m] early greedy: $(DLX_DN_EARLY=1 $B run -m /tmp/$m.gguf --device vulkan -p 'The quick brown fox' -n 24 --temp 0 2>/dev/null | od -An -tx1 | md5sum)"
        for c in DLX_DN_EARLY=1 DLX_NONE=1 DLX_DN_EARLY=1 DLX_NONE=1; do echo "[$m] $c: $(prof $m $c)"; done
        for c in DLX_DN_EARLY=1 DLX_NONE=1; do echo "[$m] tg128 $c: $(tgb $m $c)"; done
    done
fi
