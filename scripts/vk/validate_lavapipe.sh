#!/usr/bin/env bash
# Runs the Vulkan tests on lavapipe under the Khronos validation layer, taken from the
# vulkan-validationlayers package in .gl (see /work/shared/DEVICE.md) and unpacked privately, so
# nothing is installed. Any validation error fails the run (tests/vulkan/vk_test.h).
#   usage: scripts/vk/validate_lavapipe.sh [path/to/test_vulkan] [gtest filter]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$here/build-vk/tests/test_vulkan}
deb=$(ls "$here"/.gl/vulkan-validationlayers_*.deb | head -1)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
dpkg -x "$deb" "$dir"
export VK_LAYER_PATH=$dir/usr/share/vulkan/explicit_layer.d
export LD_LIBRARY_PATH=$dir/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/share/vulkan/icd.d/lvp_icd.x86_64.json}
export DELTALLM_VK_VALIDATION=1
"$bin" --gtest_brief=1 --gtest_filter="${2:-*}"
