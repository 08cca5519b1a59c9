#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-03 (last)": what a GEMV stage costs in the token against the same stage
# again right after it (2026-12-03-twice.patch, against 292785b: DLX_TWICE=1 records each
# layer's input projections and FFN pair twice, a barrier between, the second run over the same
# inputs and outputs, so the tokens stay the same; the profile names the first input stage
# "gemv in1" and the second "gemv in", the first pair "gemv ffn" and the second "gemv ffn2").
# Device: one call carrying .gl and .devrun on the packed binaries of
# `scripts/vk/device_reports.sh prepare` (built with the patch).
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-twice.patch > 2026-12-03-twice.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen3 8b q3"
for m in q9 q3; do
    for c in DLX_NONE=1 DLX_TWICE=1; do
        echo "[$m] $c greedy: $(env $c $B run -m /tmp/$m.gguf --device vulkan -p 'The quick brown fox' -n 24 --temp 0 2>/dev/null | od -An -tx1 | md5sum)"
    done
    for c in DLX_TWICE=1 DLX_NONE=1 DLX_TWICE=1; do
        env $c $B bench -m /tmp/$m.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 |
            grep -A20 "profile, decode" | grep -E "decode|gemv" | sed 's/  */ /g' | tr '\n' ' ' | sed "s/^/[$m] $c: /"
        echo
    done
done
