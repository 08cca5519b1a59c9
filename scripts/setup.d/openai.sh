#!/usr/bin/env bash
# Installs the official OpenAI client for JavaScript (an npm package, pinned) into .cache/npm
# (git-ignored): the server's end-to-end tests (tests/server) drive `deltallm serve` with it,
# unchanged. Idempotent. A failed install does not stop the rest of the setup: that test then
# fails and says so.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
dest="$here/.cache/npm"
pkg="openai"
version="6.30.1"
manifest="$dest/node_modules/$pkg/package.json"
if [ -f "$manifest" ] && grep -q "\"version\": \"$version\"" "$manifest"; then
  exit 0
fi
echo "setup: installing $pkg@$version into $dest"
mkdir -p "$dest"
if ! npm install --prefix "$dest" --no-audit --no-fund --loglevel=error "$pkg@$version" >/dev/null; then
  echo "setup: WARNING: could not install $pkg@$version; the server's client tests will fail" >&2
fi
exit 0
