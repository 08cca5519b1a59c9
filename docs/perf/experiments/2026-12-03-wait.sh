#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-03 (night)": decode with the fence polled before blocking (the tree's
# default, DELTALLM_VK_WAIT_SPIN_US=20000) against the blocking wait (=0), on the 9B, Qwen3-8B
# and 0.8B: tg128 (bench, logits to the host) and `run` (the token chosen on the device); and
# the profile's marks written at the compute stage (as the tree has them), at the top of the
# pipe (2026-12-03-only-roles.patch, DLX_TOPMARK=1), or one a token (DLX_ONEMARK=1).
# Device: one call carrying .gl and .devrun on the packed binaries of
# `scripts/vk/device_reports.sh prepare` (built with the patch).
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-only-roles.patch > 2026-12-03-only-roles.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen3 8b q3" "qwen35 0.8b q08"
gen() {
    local m=$1
    shift
    env "$@" $B run -m /tmp/$m.gguf --device vulkan --prompt-ids 1 -n 256 --temp 0 --ignore-eos \
        2>&1 >/dev/null | grep -o "([0-9.]* tokens/s)"
}
for r in 1 2; do
    for m in q9 q3 q08; do
        for w in 0 20000; do
            echo "[$r] $m spin $w: tg128 $(tgb $m DELTALLM_VK_WAIT_SPIN_US=$w) run $(gen $m DELTALLM_VK_WAIT_SPIN_US=$w)"
        done
    done
    for c in DLX_NONE=1 DLX_TOPMARK=1 DLX_ONEMARK=1; do
        echo "[$r] q9 $c: $(prof q9 $c)"
    done
done
