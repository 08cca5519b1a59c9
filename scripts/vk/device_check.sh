#!/usr/bin/env bash
# One call on the GPU machine answers "do the Vulkan kernels run right there": installs the
# carried loader packages (.gl, see /work/shared/DEVICE.md), records vulkaninfo, runs the Vulkan
# test binary on the NVIDIA driver (every supported kernel variant, including the cooperative
# matrix ones), then again under the Khronos validation layer. Results go to $OUT.
#   usage: [VALIDATION=0] scripts/vk/device_check.sh [path/to/test_vulkan]
set -u
bin=${1:-build-vk/tests/test_vulkan}
out=${OUT:-/tmp/vk_out}
mkdir -p "$out"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
export DELTALLM_TEST_TMP=$(mktemp -d)
vulkaninfo --summary >"$out/vulkaninfo.txt" 2>&1
echo "== device"; grep -E "deviceName|driverName|apiVersion" "$out/vulkaninfo.txt" | head -6

if ! grep -q "GPU id" "$out/vulkaninfo.txt" 2>/dev/null; then
  # No device seen: keep the loader's own account of why, for the next attempt.
  VK_LOADER_DEBUG=error,warn,driver "$bin" --gtest_filter='VulkanDevice.FeaturesAreQueried' >"$out/loader.log" 2>&1
  grep -m5 -E "ERROR|error" "$out/loader.log"
fi

echo "== tests on the driver"
"$bin" --gtest_brief=1 >"$out/tests.log" 2>&1
echo "rc=$?"; tail -4 "$out/tests.log"
if grep -q "no Vulkan device" "$out/tests.log"; then echo "FAILED: no Vulkan device, the tests were skipped"; fi
grep -E "FAILED|Failure" "$out/tests.log" | head -20

[ "${VALIDATION:-1}" = 0 ] && exit 0
echo "== tests under the validation layer"
VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation DELTALLM_VK_VALIDATION=1 "$bin" --gtest_brief=1 >"$out/validation.log" 2>&1
echo "rc=$?"; tail -3 "$out/validation.log"
echo "validation errors: $(grep -c 'Validation Error' "$out/validation.log")"
grep -m5 'Validation Error' "$out/validation.log" | cut -c1-400
