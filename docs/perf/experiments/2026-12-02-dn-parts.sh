#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-02 (late evening)": the decode profile with the token's choice as a role
# of its own ("sample"), and the DeltaNet step with each thread holding at most DLX_DN_KR state
# values of a column (2026-12-02-dn-parts.patch, not in the tree; 32 is the tree's rule: d_k
# cut into 4 parts for heads of 128). Device: one call carrying .gl and .devrun on the packed
# binaries of `scripts/vk/device_reports.sh prepare` (built with the patch).
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-dn-parts.patch > 2026-12-02-dn-parts.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen3 8b q8" "qwen35 0.8b q08"
prof() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A14 "profile, decode" | grep -E "decode|gemv|head|sample|deltanet|attention" | sed 's/  */ /g' | tr '\n' ' '; }
for m in q9 q08; do
    for c in 32 16 64 32 16; do echo "[$m] DLX_DN_KR=$c: $(prof $m DLX_DN_KR=$c)"; done
done
echo "[q8] $(prof q8 X=0)"
