#!/usr/bin/env bash
# docs/perf/history.md, "2026-12-02 (late evening)": the token command that copies the logits to the host
# no longer also samples (the caller of decode() chooses from the logits itself), against the
# same command with the sampling kept (DLX_SAMPLE_TOO=1: 2026-12-02-logits-only.patch on 0bb2920,
# not in the tree). bench's tg and its profile run that command. Device: one call
# carrying .gl and .devrun on the packed binaries of `scripts/vk/device_reports.sh prepare`.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-logits-only.patch > 2026-12-02-logits-only.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen3 8b q8" "qwen35 0.8b q08"
prof() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 1 --profile 2>&1 | grep -A14 "profile, decode" | grep -E "decode|head|sample|logits" | sed 's/  */ /g' | tr '\n' ' '; }
tgb() { env $2 $B bench -m /tmp/$1.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8 | tr '\n' ' '; }
for m in q9 q8 q08; do
    for c in 1 0 1 0; do echo "[$m] sample too $c: $(prof $m DLX_SAMPLE_TOO=$c)"; done
done
for m in q9 q8 q08; do
    for c in 1 0 1 0; do echo "[$m] tg128 sample too $c: $(tgb $m DLX_SAMPLE_TOO=$c)"; done
done
