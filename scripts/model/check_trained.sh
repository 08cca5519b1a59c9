#!/usr/bin/env bash
# The float32 checks of the built-in model that CI cannot run (the float32 weights are 50 MB and
# are not committed): converts the Hugging Face folder a training run returned (default
# build/trained/model; scripts/model/device_train.sh) to F32, Q8_0 and Q4_K_M GGUF files, scores
# the held-out text with each as transformers did (metrics.json), and runs the trained-model tests
# with DELTALLM_TRAINED_F32 set, so the free-running greedy continuations are compared token for
# token on the CPU chain and the Vulkan driver.
#   scripts/model/check_trained.sh [HF_DIR] [HELD_OUT_TEXT]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$here/build}
hf=${1:-$here/build/trained/model}
text=${2:-$here/build/model-data/heldout.txt}
out=$(dirname "$hf")
for t in f32 q8_0 q4_k_m; do
  "$build/deltallm" convert "$hf" -o "$out/tiny-$t.gguf" --type "$t" --name deltallm-tiny
done
for t in f32 q8_0 q4_k_m; do
  echo "== $t"
  "$build/deltallm" perplexity -m "$out/tiny-$t.gguf" -f "$text" -c 512 --chunks 400 2>/dev/null | tail -2
done
echo "== shipped file: $(cmp -s "$out/tiny-q8_0.gguf" "$here/models/deltallm-tiny-q8_0.gguf" && echo same as the conversion || echo DIFFERS from the conversion)"
DELTALLM_TRAINED_F32=$out/tiny-f32.gguf "$build/tests/test_tools" --gtest_filter='OnDevice/TrainedModel.*'
