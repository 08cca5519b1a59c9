#!/usr/bin/env bash
# The second call of docs/perf/history.md's entry "2026-12-03 (17:40)": the 9B's decode profile and
# tg128 of the build with the attention's value rows at one stride against the one before it
# (packed as in 2026-12-03-attn-vrows.sh), more rounds, the new build first in each.
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
B0=$P/deltallm.base
synth "qwen35 9b q9"
$B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 64 -r 2 >/dev/null 2>&1
for r in 1 2 3; do
    for b in $B $B0; do
        echo "q9 $(basename $b) round $r: $(B=$b prof q9 | grep -o 'tokens, [0-9.]* us a token\|attention [0-9.]* ms [0-9.]*% [0-9.]* us/token')"
    done
done
for r in 1 2 3; do
    echo "tg128 q9 new $r: $(tgb q9) base: $(B=$B0 tgb q9)"
done
