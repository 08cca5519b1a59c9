#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-03 (night)": the logits of a decoded token on their way to the host
# (2026-12-03-logits.patch, against 7c208ab): DLX_CACHED=1 puts the session's logits in
# host-cached memory (MemoryKind::readback) instead of the first host-visible coherent type;
# DLX_HOSTHEAD=1 has the head's GEMV write them there itself instead of a copy after it. tg128
# (bench: every token's logits to the host) on the 9B and the 0.8B, alternating, and the logits
# of a greedy run compared.
# Device: one call carrying .gl and .devrun on the packed binaries of
# `scripts/vk/device_reports.sh prepare` (built with the patch).
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-logits.patch > 2026-12-03-logits.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08"
$B info --devices 2>&1 | grep -i -A12 "memory" | head -20
for m in q9 q08; do
    for c in DLX_NONE=1 DLX_CACHED=1 DLX_HOSTHEAD=1 "DLX_CACHED=1 DLX_HOSTHEAD=1"; do
        env $c $B run -m /tmp/$m.gguf --device vulkan --prompt-ids 1,2,3 -n 6 --temp 0 \
            --dump-logits /tmp/$m.npy >/dev/null 2>&1
        echo "[$m] $c logits: $(md5sum </tmp/$m.npy)"
    done
done
for r in 1 2; do
    for m in q9 q08; do
        for c in DLX_NONE=1 DLX_CACHED=1 DLX_HOSTHEAD=1 "DLX_CACHED=1 DLX_HOSTHEAD=1"; do
            echo "[$r] $m $c: tg128 $(tgb $m $c)"
        done
    done
done
