#!/usr/bin/env bash
# Trains the built-in model in one call of the GPU machine (torch and transformers are there; no
# network). Prepare here first, then send the run with the token files carried:
#
#   bash scripts/model/device_train.sh prepare     corpus, tokens -> build/model-data (~17 MB)
#   run(command="bash scripts/model/device_train.sh", carry=["build/model-data"])
#
# On the device it runs scripts/model/train.py (at most ~8 minutes of training, stopping early on
# the held-out loss) and leaves under $OUT: model/ (safetensors shards under 16 MB, config,
# tokenizer), loss.png, loss.csv, samples.txt, samples.json, reference/, packed as
# trained.tar.part-* beside metrics.json and train.log.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
data=$here/build/model-data
if [ "${1:-}" = "prepare" ]; then
  bash "$here/scripts/model/corpus.sh"
  mkdir -p "$data"
  bpe=(python3 "$here/scripts/model/bpe.py" tokenize --tokenizer "$here/scripts/model/tokenizer.json")
  "${bpe[@]}" --corpus "$here/build/corpus/train.jsonl" --out "$data/train.u16"
  "${bpe[@]}" --corpus "$here/build/corpus/heldout.jsonl" --out "$data/heldout.u16"
  "${bpe[@]}" --corpus "$here/build/corpus/heldout.txt" --out "$data/heldout_text.u16"
  cp "$here/build/corpus/heldout.txt" "$data/"
  ls -la "$data"
  exit 0
fi
: "${OUT:?run this on the device machine (OUT is its output folder), or pass 'prepare'}"
for f in train.u16 heldout.u16 heldout_text.u16; do
  [ -f "$data/$f" ] || { echo "error: $data/$f is missing: run '$0 prepare' here and carry build/model-data" >&2; exit 1; }
done
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
PYTHONUNBUFFERED=1 timeout 560 python3 "$here/scripts/model/train.py" \
  --config "$here/scripts/model/train_config.json" --data "$data" --out "$OUT" 2>&1 |
  tee "$OUT/train.log" || echo "device_train: training exited with an error (see train.log)"
# A call returns at most 8 files of 16 MiB: everything but the log and the metrics travels as
# one tar in 15 MB parts (join with: cat trained.tar.part-* | tar -x).
cd "$OUT"
parts=(model reference loss.png loss.csv samples.txt samples.json)
have=()
for p in "${parts[@]}"; do [ -e "$p" ] && have+=("$p"); done
[ -f samples.txt ] && cat samples.txt
if [ ${#have[@]} -gt 0 ]; then
  tar -cf - "${have[@]}" | split -b 15M - trained.tar.part-
  rm -rf "${have[@]}"
fi
ls -la "$OUT"
