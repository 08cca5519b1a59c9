#!/usr/bin/env bash
# Provides a newer shader compiler for the Vulkan kernel variants: Debian 12's glslc lacks
# GL_KHR_cooperative_matrix and GL_NV_cooperative_matrix2, Debian 13's (trixie) has both. The
# trixie packages are fetched with apt-get download through a private sources list and private
# state folders (nothing under /etc/apt changes), unpacked into .tools/trixie (git-ignored) and
# run through their own dynamic loader by scripts/vk/trixie. Idempotent; on failure the build
# falls back to the system glslc and builds only the variants it knows.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
dest="$here/.tools/trixie"
if [ -x "$dest/usr/bin/glslc" ] && "$here/scripts/vk/trixie" glslc --version >/dev/null 2>&1; then
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
echo "deb [signed-by=$keyring] http://deb.debian.org/debian trixie main" >"$work/sources.list"
o=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/none"
   -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
   -o "APT::Architecture=amd64" -o "APT::Architectures=amd64" -o "Debug::NoLocking=1")
echo "setup: fetching trixie's glslc into $dest"
if ! apt-get "${o[@]}" -qq update >/dev/null 2>&1; then
  echo "setup: warning: cannot reach the trixie archive; only the system glslc's shader variants will be built" >&2
  exit 0
fi
if ! (cd "$work/debs" && apt-get "${o[@]}" -qq download glslc libshaderc1 libc6 libstdc++6 libgcc-s1 spirv-tools libvulkan-dev >/dev/null 2>&1); then
  echo "setup: warning: apt-get download of trixie's glslc failed; only the system glslc's variants will be built" >&2
  exit 0
fi
rm -rf "$dest" && mkdir -p "$dest"
for f in "$work"/debs/*.deb; do dpkg -x "$f" "$dest"; done
if "$here/scripts/vk/trixie" glslc --version >/dev/null 2>&1; then
  echo "setup: $("$here/scripts/vk/trixie" glslc --version | head -1)"
else
  echo "setup: warning: trixie's glslc does not run here; removing it" >&2
  rm -rf "$dest"
fi
exit 0
