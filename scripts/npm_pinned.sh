#!/usr/bin/env bash
# Installs one npm package at a pinned version into .cache/npm (git-ignored), for the tests that
# compare against it; does nothing when that version is there. A failed install does not stop the
# setup: the tests that need the package then fail and say so.
#   scripts/npm_pinned.sh PACKAGE VERSION "the tests that need it"
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
pkg=$1 version=$2 users=$3
dest="$here/.cache/npm"
manifest="$dest/node_modules/$pkg/package.json"
if [ -f "$manifest" ] && grep -q "\"version\": \"$version\"" "$manifest"; then
  exit 0
fi
echo "setup: installing $pkg@$version into $dest"
mkdir -p "$dest"
if ! npm install --prefix "$dest" --no-audit --no-fund --loglevel=error "$pkg@$version" >/dev/null; then
  echo "setup: WARNING: could not install $pkg@$version; $users will fail" >&2
fi
exit 0
