#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-02 (late evening)": three experiments of 2026-12-02-out-warm.patch (not
# in the tree) on the 9B's decode: the output projections in 512 invocations (DLX_OUT_SLOTS=16),
# the output projections reading x as if rounded already (DLX_OUT_PRE=1, results wrong: the bound
# of a producer that rounds), the attention's pipeline run over scratch beside the DeltaNet step
# before each attention layer (DLX_ATTN_WARM=1); and the DeltaNet step's column groups
# (DELTALLM_VK_DN_COLUMNS). Device: one call carrying .gl and .devrun on the packed binaries of
# `scripts/vk/device_reports.sh prepare` (built with the patch).
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-out-warm.patch > 2026-12-02-out-warm.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08"
prof() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A14 "profile, decode" | grep -E "decode|gemv|head|deltanet|attention" | sed 's/  */ /g' | tr '\n' ' '; }
tgb() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '; }
for m in q9 q08; do
    for c in "X=0" "DLX_OUT_SLOTS=16" "DLX_OUT_PRE=1" "DLX_ATTN_WARM=1" "DELTALLM_VK_DN_COLUMNS=16" "DELTALLM_VK_DN_COLUMNS=64" "X=0"; do
        echo "[$m] $c: $(prof $m "$c")"
    done
done
for c in "X=0" "DLX_OUT_SLOTS=16" "DLX_ATTN_WARM=1" "X=0"; do echo "[q9] tg128 $c: $(tgb q9 "$c")"; done
$B run -m /tmp/q9.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 8 --temp 0 --ignore-eos --dump-logits /tmp/l0.npy >/dev/null 2>&1
DLX_ATTN_WARM=1 $B run -m /tmp/q9.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 8 --temp 0 --ignore-eos --dump-logits /tmp/l1.npy >/dev/null 2>&1
DLX_OUT_SLOTS=16 $B run -m /tmp/q9.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 8 --temp 0 --ignore-eos --dump-logits /tmp/l2.npy >/dev/null 2>&1
echo "logits warm / slots bit-equal to base: $(cmp -s /tmp/l0.npy /tmp/l1.npy && echo yes || echo no) / $(cmp -s /tmp/l0.npy /tmp/l2.npy && echo yes || echo no) ($(stat -c %s /tmp/l0.npy) bytes)"
