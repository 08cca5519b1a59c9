#!/usr/bin/env bash
# The measurement of docs/perf/history.md's entry "2026-12-02 (late morning)", last table: the GEMVs
# alone in their stage over rows of 4096+ values kept at two rows a group or more (DLX_KMIN=2),
# on a build of 6f15df5 with 2026-12-02-kmin.patch applied (not in the tree).
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-kmin.patch > 2026-12-02-kmin.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen3 8b q8"
for m in q9 q8; do
    for v in 0 2; do
        DLX_KMIN=$( [ $v = 2 ] && echo 2 ) timeout 100 $B run -m /tmp/$m.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 8 --temp 0 --ignore-eos --dump-logits /tmp/k${v}_$m.npy >/dev/null 2>&1
    done
    python3 -c "import numpy as np; a=np.load('/tmp/k0_$m.npy'); b=np.load('/tmp/k2_$m.npy'); print('$m max |diff|', np.abs(a-b).max(), a.shape)"
done
prof() { env $3 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A14 "profile, decode" | grep -E "decode|gemv in|gemv out|gemv down|gemv ffn" | sed 's/  */ /g' | tr '\n' ' '; }
for m in q9 q8; do
    echo "[$m] base: $(prof $m)"
    echo "[$m] kmin2: $(prof $m DLX_KMIN=2)"
done
tgb() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '; }
for r in 1 2; do for m in q9 q8; do
    echo "[$m] base $(tgb $m) | kmin2 $(tgb $m DLX_KMIN=2)"
done; done
