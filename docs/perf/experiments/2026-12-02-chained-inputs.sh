#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-02 (later)": the token command with no
# barrier between a layer's input projections and its DeltaNet step or attention. Measured and
# not kept; the code is 2026-12-02-chained-inputs.patch (against dccacc9), with two switches:
#   DELTALLM_EXP_NOBAR_IN=1|2   the bound: the barrier left out (1: before the DeltaNet steps,
#                               2: before the attentions too); results wrong
#   DELTALLM_EXP_CHAIN_IN=1|2|3 the input projections' workgroups count themselves on a word a
#                               layer and the step (1), the attention (2) or both (3) wait for
#                               the count in the same stage; +4 keeps the barrier as well
#
# Here:   git show 53ff2ba:docs/perf/experiments/2026-12-02-chained-inputs.patch | git apply
#         BUILD_DIR=build-vk bash scripts/build.sh
#         BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-chained-inputs.patch > 2026-12-02-chained-inputs.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen3 8b q38" "qwen35 0.8b q08"
# The bound.
for r in 1 2; do for m in q9 q08; do
    echo "[$m] off $(DELTALLM_EXP_NOBAR_IN=0 tg $m) | 1 $(DELTALLM_EXP_NOBAR_IN=1 tg $m) | 2 $(DELTALLM_EXP_NOBAR_IN=2 tg $m)"
done; done
echo "[q38] off $(DELTALLM_EXP_NOBAR_IN=0 tg q38) | 2 $(DELTALLM_EXP_NOBAR_IN=2 tg q38)"
# The chained command: its logits over 100 greedy tokens against the command with barriers.
cmp() {  # MODEL MODE
    DELTALLM_EXP_CHAIN_IN=$2 timeout 60 $B run -m /tmp/$1.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 100 --temp 0 --ignore-eos --print-ids --dump-logits /tmp/l_$1_$2.npy >/dev/null 2>&1
    python3 -c "
import numpy as np
a=np.load('/tmp/l_$1_0.npy'); b=np.load('/tmp/l_$1_$2.npy')
d=np.abs(a-b).max(axis=1); bad=np.nonzero(d)[0]
print('$1 mode $2', 'bit-equal', np.array_equal(a,b), 'first differing row', bad[:1], 'max', d.max())
"
}
for m in q9 q38 q08; do
    DELTALLM_EXP_CHAIN_IN=0 timeout 60 $B run -m /tmp/$m.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 100 --temp 0 --ignore-eos --print-ids --dump-logits /tmp/l_${m}_0.npy >/dev/null 2>&1
done
cmp q9 3; cmp q9 7; cmp q38 2; cmp q38 6; cmp q08 3
for r in 1 2; do for m in q9 q38 q08; do
    echo "[$m] off $(DELTALLM_EXP_CHAIN_IN=0 tg $m) | 3 $(DELTALLM_EXP_CHAIN_IN=3 tg $m)"
done; done
