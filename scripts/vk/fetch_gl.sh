#!/usr/bin/env bash
# Fetches the Vulkan loader and what NVIDIA's Vulkan driver needs beside it into .gl/ (git-ignored)
# for device calls on the GPU machine, which has a driver but no loader. Without the GLVND
# libraries (libglvnd0, libglx0, libegl1 ...) the loader finds the NVIDIA ICD but cannot create
# an instance ("Could not get 'vkCreateInstance' via 'vk_icdGetInstanceProcAddr'"). The Khronos
# validation layer comes from Debian 13: Debian 12's (1.3.239) does not know the cooperative
# matrix structures and reports them as errors.
# In the device call: for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig;
#                     export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
dest=$here/.gl
mkdir -p "$dest"
grep -qx '/.gl/' "$here/.git/info/exclude" 2>/dev/null || echo /.gl/ >>"$here/.git/info/exclude"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fetch() {  # suite packages...
    local suite=$1
    shift
    mkdir -p "$work/$suite/lists/partial" "$work/$suite/cache/archives/partial"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" \
        >"$work/$suite/sources.list"
    local o=(-o "Dir::Etc::SourceList=$work/$suite/sources.list" -o "Dir::Etc::SourceParts=$work/none"
             -o "Dir::State::Lists=$work/$suite/lists" -o "Dir::Cache=$work/$suite/cache"
             -o "APT::Architecture=amd64" -o "APT::Architectures=amd64" -o "Debug::NoLocking=1")
    apt-get "${o[@]}" -qq update
    (cd "$dest" && apt-get "${o[@]}" -qq download "$@" 2>&1 | grep -v unsandboxed || true)
}
rm -f "$dest"/*.deb
fetch bookworm libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libgles2 libopengl0 libx11-6 libx11-xcb1 \
    libxcb1 libxau6 libxdmcp6 libbsd0 libmd0 libxext6 libwayland-client0 libffi8
fetch trixie vulkan-validationlayers
ls "$dest"
du -sh "$dest"
