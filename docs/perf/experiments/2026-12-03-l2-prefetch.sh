#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-03": weights read into the device's L2 cache beside stages that do not
# stream them (2026-12-03-l2-prefetch.patch: DLX_PF bit 1, the output projection's weights beside
# the DeltaNet step or the attention; bit 2, the first DLX_PF_MB MiB of the FFN pair beside the
# output projection). Profile and tg128. Device: one call carrying .gl and .devrun on the packed
# binaries of `scripts/vk/device_reports.sh prepare` (built with the patch).
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-l2-prefetch.patch > 2026-12-03-l2-prefetch.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen35 0.8b q08" "qwen3 8b q3"
prof() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A14 "profile, decode" | grep -E "decode|gemv|head|deltanet|attention" | sed 's/  */ /g' | tr '\n' ' '; }
tgb() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '; }
for m in ${MODELS:-q9 q3 q08}; do
    for c in ${CASES:-"DLX_PF=0" "DLX_PF=1" "DLX_PF=3 DLX_PF_MB=16" "DLX_PF=3 DLX_PF_MB=40" "DLX_PF=0" "DLX_PF=1"}; do
        echo "[$m] $c: $(prof $m "$c")"
    done
done
for m in ${MODELS:-q9 q3 q08}; do
    for c in ${TGCASES:-"DLX_PF=0" "DLX_PF=1" "DLX_PF=3"}; do echo "[$m] tg128 $c: $(tgb $m "$c")"; done
done
