#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-03 (night)": each GEMV stage of the 9B's token with the other roles'
# dispatches left out (2026-12-03-only-roles.patch, against 68de93c: DLX_ONLY=roles records the
# dispatches of those roles only; every stage, its barrier and its timestamp stay; results
# wrong), against the token as it is: whether a stage costs more in the token than alone because
# of the kernels between two of its runs.
# Device: one call carrying .gl and .devrun on the packed binaries of
# `scripts/vk/device_reports.sh prepare` (built with the patch).
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-only-roles.patch > 2026-12-03-only-roles.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9"
for c in DLX_NONE=1 DLX_ONLY=ffn DLX_ONLY=down DLX_ONLY=out DLX_ONLY=in \
    DLX_ONLY=in,out,ffn,down,head DLX_ONLY=ffn,deltanet,attention DLX_ONLY=ffn,down \
    DLX_ONLY=ffn,out DLX_ONLY=ffn,in DLX_NONE=1 DLX_ONLY=ffn; do
    echo "$c: $(prof q9 $c)"
done
