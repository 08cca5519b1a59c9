#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-01 (late night)": the decode token command
# with its barriers left out, and with its GEMV stages chained by counts. Both changes were
# measured and not kept; their code is the two patches beside this script (against 09e1731).
#
# Here:   git show 53ff2ba:docs/perf/experiments/2026-12-01-<name>.patch | git apply
#         BUILD_DIR=build-vk bash scripts/build.sh
#         BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script; it prints the tg128 rows.
# NAME=no-barriers or NAME=chained-stages picks the rows (the patch applied must match).
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-01-no-barriers.patch > 2026-12-01-no-barriers.patch
#   git show 53ff2ba:docs/perf/experiments/2026-12-01-chained-stages.patch > 2026-12-01-chained-stages.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen3 8b q38" "qwen35 0.8b q08"
for m in q9 q38 q08; do
    if [ "${NAME:-chained-stages}" = no-barriers ]; then
        echo "[$m] barriers $(tg $m) | none (results wrong) $(DELTALLM_EXP_NOBAR=1 tg $m)"
        continue
    fi
    # DELTALLM_EXP_CHAIN_MODE: 1 the chained form; + 2 no wait (wrong), 4 x and the residual
    # through the plain bindings (wrong), 8 no fences at the wait, 16 no fence at the signal,
    # 32 the count polled by atomicOr, 64 the first row block's weights touched before the wait.
    line="[$m] off $(DELTALLM_VK_CHAIN=off tg $m) | barriers kept $(DELTALLM_EXP_CHAIN_BAR=1 DELTALLM_VK_CHAIN=on tg $m)"
    for v in 1 3 5 13 17 29 37 61 65 93; do
        line="$line | $v $(DELTALLM_EXP_CHAIN_MODE=$v DELTALLM_VK_CHAIN=on tg $m)"
    done
    echo "$line"
done
# The logits of 100 greedy tokens on the 9B, chained against barriers (bit-equal or not).
for c in off 1 93; do
    DELTALLM_EXP_CHAIN_MODE=$c DELTALLM_VK_CHAIN=$([ $c = off ] && echo off || echo on) $B run \
        -m /tmp/q9.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 100 --temp 0 --ignore-eos \
        --print-ids --dump-logits /tmp/l_$c.npy >/dev/null 2>&1
done
python3 -c "
import numpy as np
a = np.load('/tmp/l_off.npy')
for c in ['1', '93']:
    b = np.load('/tmp/l_' + c + '.npy')
    print(c, 'bit-equal', np.array_equal(a, b), 'max abs diff', float(np.abs(a - b).max()))
"
