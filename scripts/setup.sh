#!/usr/bin/env bash
# Installs what deltallm needs to build and test on Debian 12 (run as root). Idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libgtest-dev libgmock-dev nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libpcre2-dev libfmt-dev libicu-dev
  libvulkan-dev glslc glslang-tools spirv-tools mesa-vulkan-drivers vulkan-tools vulkan-validationlayers
  clang libclang-rt-14-dev python3 python3-numpy python3-jinja2
)
# Node.js and npm (for the tokenizer reference package): take whatever provides the commands
# (Debian's packages, or a vendor's nodejs that bundles npm and conflicts with Debian's).
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Optional extra steps owned by modules (newer shader compiler, npm reference packages ...).
for s in "$here"/scripts/setup.d/*.sh; do
  [ -e "$s" ] || continue
  bash "$s"
done
