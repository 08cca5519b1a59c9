#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-03 (night)": what the profile's timestamps add to the token, and what
# the host adds between tokens (2026-12-03-only-roles.patch, against 68de93c: DLX_ONEMARK=1
# writes the token's last timestamp only, so the profile's one role is the whole token; DLX_SPIN=1
# polls the token's fence instead of waiting on it; DLX_ONLY as in 2026-12-03-only-roles.sh).
# The device time of a token against the wall time of tg128 (bench, logits to the host) and of
# `run` (the token chosen on the device).
# Device: one call carrying .gl and .devrun on the packed binaries of
# `scripts/vk/device_reports.sh prepare` (built with the patch).
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-03-only-roles.patch > 2026-12-03-only-roles.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9"
gen() {
    env "$@" $B run -m /tmp/q9.gguf --device vulkan --prompt-ids 1 -n 256 --temp 0 --ignore-eos \
        2>&1 >/dev/null | grep generation
}
for r in 1 2; do
    echo "[$r] marks: $(prof q9 DLX_NONE=1 | cut -c1-90)"
    echo "[$r] one mark: $(prof q9 DLX_ONEMARK=1)"
    echo "[$r] one mark, spin: $(prof q9 DLX_ONEMARK=1 DLX_SPIN=1)"
    echo "[$r] tg128: $(tgb q9 DLX_NONE=1)"
    echo "[$r] tg128 spin: $(tgb q9 DLX_SPIN=1)"
    echo "[$r] run: $(gen DLX_NONE=1)"
    echo "[$r] run spin: $(gen DLX_SPIN=1)"
    echo "[$r] ffn only, marks: $(prof q9 DLX_ONLY=ffn | cut -c1-140)"
    echo "[$r] ffn only, one mark: $(prof q9 DLX_ONLY=ffn DLX_ONEMARK=1)"
    echo "[$r] GEMVs only, one mark: $(prof q9 DLX_ONLY=in,out,ffn,down,head DLX_ONEMARK=1)"
done
