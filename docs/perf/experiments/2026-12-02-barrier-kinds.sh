#!/usr/bin/env bash
# The measurements of docs/perf/history.md's entry "2026-12-02": the barrier between the token
# command's stages as an execution dependency only (DELTALLM_EXP_BARRIER=1) or with shader reads
# only as its destination access (=2). Measured and not kept; the code is
# 2026-12-02-barrier-kinds.patch (against b6083d4).
#
# Here:   git show 53ff2ba:docs/perf/experiments/2026-12-02-barrier-kinds.patch | git apply
#         BUILD_DIR=build-vk bash scripts/build.sh
#         BUILD_DIR=build-vk bash scripts/vk/device_reports.sh prepare
# Device: one call carrying .gl and .devrun that runs this script.
# The experiment patches named here left the tree after 53ff2ba; each is recovered with
#   git show 53ff2ba:docs/perf/experiments/2026-12-02-barrier-kinds.patch > 2026-12-02-barrier-kinds.patch
cd "$(dirname "$0")/../../.."
. docs/perf/experiments/device.sh
synth "qwen35 9b q9" "qwen3 8b q38" "qwen35 0.8b q08"
for r in 1 2; do for m in q9 q38 q08; do echo "[$m] b0 $(DELTALLM_EXP_BARRIER=0 tg $m) | b1 $(DELTALLM_EXP_BARRIER=1 tg $m) | b2 $(DELTALLM_EXP_BARRIER=2 tg $m)"; done; done
for s in 0 1; do DELTALLM_EXP_BARRIER=$s DELTALLM_VK_SPEED=1 timeout 60 $T --gtest_filter='StageSpeed.Report' 2>&1 | grep "a stage"; done
for s in 0 1 2; do DELTALLM_EXP_BARRIER=$s $B run -m /tmp/q9.gguf --device vulkan --prompt-ids 1,2,3,4,5 -n 100 --temp 0 --ignore-eos --print-ids --dump-logits /tmp/l_$s.npy > /tmp/ids_$s.txt 2>&1; done
python3 -c "
import numpy as np
a=np.load('/tmp/l_0.npy')
for s in '12':
    b=np.load('/tmp/l_'+s+'.npy'); print(s, 'bit-equal', np.array_equal(a,b), float(np.abs(a-b).max()))
"
