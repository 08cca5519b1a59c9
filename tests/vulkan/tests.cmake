# The window tests hold the device against the double-precision reference forward pass of the
# CPU tests (same tiny models, dequantized weights), which is independent of both executors.
target_sources(test_vulkan PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../cpu/reference_forward.cpp)
