#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-02 (morning, later)": the decode profile with
# each input projection's and down projection's stage named by its weight type and layer kind
# (2026-12-02-roles-by-type.patch, DELTALLM_EXP_ROLES=1), then gemv.comp's weight loads marked
# nontemporal (2026-12-02-nontemporal.patch: GL_EXT_nontemporal_keyword under the Vulkan memory
# model) against the build without: the machine code's loads, the logits, the profile and tg128.
#
# Here:   git show 53ff2ba:docs/perf/experiments/2026-12-02-roles-by-type.patch | git apply
#         (cd build-vk && ninja) && strip -o .devrun/deltallm_nt0 build-vk/deltallm
#         git show 53ff2ba:docs/perf/experiments/2026-12-02-nontemporal.patch | git apply
#         (cd build-vk && ninja) && BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-nontemporal.patch > 2026-12-02-nontemporal.patch
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-roles-by-type.patch > 2026-12-02-roles-by-type.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
B0=$PWD/.devrun/deltallm_nt0
synth "qwen35 9b q9" "qwen3 8b q8" "qwen35 0.8b q08"
$B0 bench -m /tmp/q9.gguf --device vulkan -p 0 -n 64 -r 2 >/dev/null 2>&1
for r in 1 2; do
    echo "== q9 roles by type, round $r"
    DELTALLM_EXP_ROLES=1 $B0 bench -m /tmp/q9.gguf --device vulkan -p 0 -n 64 -r 2 --profile 2>&1 |
        grep -A16 "profile, decode"
done
d=$(mktemp -d)
DELTALLM_LOG=info DELTALLM_VK_KERNEL_STATS=1 DELTALLM_PIPELINE_CACHE=$d timeout 90 \
    $B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 4 -r 1 >"$d/stats.txt" 2>&1
PATH=$P:$PATH:/usr/local/cuda/bin python3 scripts/vk/sass.py "$d"/*.cache "$d/stats.txt" "$d/sass" >/dev/null 2>&1
for f in "$d"/sass/*gemv_q4_k_swiglu_nin*.sass; do
    echo "$f"
    grep -oE "LDG\.[A-Z0-9.]+" "$f" | sort | uniq -c
done
for m in q9 q08; do
    for b in $B0 $B; do
        timeout 100 $b run -m /tmp/$m.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 8 --temp 0 \
            --ignore-eos --print-ids --dump-logits /tmp/$(basename $b)_$m.npy 2>/dev/null | tail -1
    done
    python3 -c "import numpy as np; a=np.load('/tmp/deltallm_nt0_$m.npy'); b=np.load('/tmp/deltallm_$m.npy'); print('$m max |diff|', np.abs(a-b).max(), 'rows', a.shape)"
done
prof() { $1 bench -m /tmp/$2.gguf --device vulkan -p 0 -n 64 -r 2 --profile 2>&1 | grep -A10 "profile, decode" | head -10; }
for r in 1 2; do
    echo "== base"; prof $B0 q9
    echo "== nontemporal"; prof $B q9
done
tgb() { $1 bench -m /tmp/$2.gguf --device vulkan -p 0 -n 128 -r 2 --bw-gbps 4800 2>&1 | grep -E "tg128|rror" | cut -d'|' -f8; }
for r in 1 2; do for m in q9 q8 q08; do
    echo "[$m] tg base $(tgb $B0 $m) | nontemporal $(tgb $B $m)"
done; done
