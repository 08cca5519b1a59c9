# The window tests hold the device against the double-precision reference forward pass of the
# CPU tests (same tiny models, dequantized weights), which is independent of both executors.
target_sources(test_vulkan PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../cpu/reference_forward.cpp)

# The whole Vulkan suite once more under the Khronos validation layer (Debian's
# vulkan-validationlayers, which scripts/setup.sh installs): any message of error severity from
# any device the tests open fails the run. Without the layer this test fails rather than pass
# unvalidated.
add_test(NAME VulkanSuiteUnderValidationLayer
         COMMAND sh -c "test -f /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json || { echo 'the Khronos validation layer is not installed (apt install vulkan-validationlayers)'; exit 1; }; exec \"$0\" --gtest_brief=1" $<TARGET_FILE:test_vulkan>)
# It is the longest test by far (~330 s on lavapipe and two cores, a quarter of all the tests'
# time): a high COST starts it first, beside the others, rather than alone at the end of a fresh
# checkout's run (which has no timings of earlier runs to order by).
set_tests_properties(VulkanSuiteUnderValidationLayer PROPERTIES
  ENVIRONMENT "VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation;DELTALLM_VK_VALIDATION=1"
  TIMEOUT 1200 COST 1000000)
