#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-02": the decode GEMVs copying each row
# block's weights into shared memory before the products (DELTALLM_VK_GEMV_STAGE=1), and also
# requesting the next block's while this one's products run (=2). Measured and not kept; the
# code is 2026-12-02-staged-gemv.patch (against b6083d4).
#
# Here:   git show 53ff2ba:docs/perf/experiments/2026-12-02-staged-gemv.patch | git apply
#         BUILD_DIR=build-vk bash scripts/build.sh
#         BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script ($OUT: the machine code).
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-staged-gemv.patch > 2026-12-02-staged-gemv.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen3 8b q38"
for r in 1 2; do for m in q9 q38; do echo "[$m] stage0 $(DELTALLM_VK_GEMV_STAGE=0 tg $m) | stage1 $(DELTALLM_VK_GEMV_STAGE=1 tg $m) | stage2 $(DELTALLM_VK_GEMV_STAGE=2 tg $m)"; done; done
for s in 0 1 2; do echo "== profile stage $s"; DELTALLM_VK_GEMV_STAGE=$s timeout 60 $B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 64 -r 2 --profile 2>&1 | grep -v "^|\|^$\|floors" | head -25; done
for s in 1 2 0; do echo "== rows stage $s"; DELTALLM_VK_GEMV_STAGE=$s DELTALLM_VK_SPEED=1 timeout 150 $T --gtest_filter=GemvSpeed.Rows 2>&1 | grep -i "q4_K" | grep -v "no decode" | grep "wide auto"; done
for s in 0 2; do DELTALLM_VK_GEMV_STAGE=$s $B run -m /tmp/q9.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 100 --temp 0 --ignore-eos --print-ids --dump-logits /tmp/l_$s.npy > /tmp/ids_$s.txt 2>&1; done
python3 -c "
import numpy as np
a=np.load('/tmp/l_0.npy'); b=np.load('/tmp/l_2.npy')
print('logits max abs diff', float(np.abs(a-b).max()), 'scale', float(np.abs(a).max()), 'ids equal', open('/tmp/ids_0.txt').read()==open('/tmp/ids_2.txt').read())
"
d=/tmp/sassd; rm -rf $d; mkdir -p $d
DELTALLM_VK_GEMV_STAGE=2 DELTALLM_LOG=info DELTALLM_VK_KERNEL_STATS=1 DELTALLM_PIPELINE_CACHE=$d timeout 90 $B bench -m /tmp/q9.gguf --device vulkan -p 0 -n 4 -r 1 >"$d/stats.txt" 2>&1
grep -i "gemv_q4_k" $d/stats.txt | head -20
PATH=$P:$PATH:/usr/local/cuda/bin python3 scripts/vk/sass.py "$d"/*.cache "$d/stats.txt" "$d/sass" >/dev/null 2>&1
ls $d/sass | head -40
for f in $d/sass/*q4_k*; do echo "$f: LDGSTS $(grep -c LDGSTS $f) LDG $(grep -c 'LDG' $f) STS $(grep -c 'STS' $f) LDS $(grep -c 'LDS' $f)"; done
tar -C $d -cJf $OUT/sass.tar.xz sass stats.txt
