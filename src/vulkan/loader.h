// The Vulkan loader, opened at run time (dlopen of libvulkan.so.1) so the deltallm binary starts
// and serves on the CPU on machines without Vulkan. Every entry point the driver calls is a
// function pointer filled here: the global ones and the core device-level ones when the loader
// is opened, instance-level ones after an instance exists. The device-level ones are the
// loader's exported functions, which find each call's device through its handle, so one process
// may hold several devices (with and without the validation layer, of different drivers); the
// device extension functions are each device's own (Device).
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace dl::vk {

#define DL_VK_GLOBAL_FUNCS(X)                 \
    X(vkCreateInstance)                       \
    X(vkEnumerateInstanceExtensionProperties) \
    X(vkEnumerateInstanceLayerProperties)     \
    X(vkEnumerateInstanceVersion)

#define DL_VK_INSTANCE_FUNCS(X)                         \
    X(vkDestroyInstance)                                \
    X(vkEnumeratePhysicalDevices)                       \
    X(vkGetPhysicalDeviceProperties)                    \
    X(vkGetPhysicalDeviceProperties2)                   \
    X(vkGetPhysicalDeviceFeatures2)                     \
    X(vkGetPhysicalDeviceMemoryProperties)              \
    X(vkGetPhysicalDeviceQueueFamilyProperties)         \
    X(vkEnumerateDeviceExtensionProperties)             \
    X(vkCreateDevice)                                   \
    X(vkGetDeviceProcAddr)                              \
    X(vkCreateDebugUtilsMessengerEXT)                   \
    X(vkDestroyDebugUtilsMessengerEXT)                  \
    X(vkGetPhysicalDeviceCooperativeMatrixPropertiesNV) \
    DL_VK_KHR_COOPMAT_FUNCS(X)                          \
    DL_VK_NV_COOPMAT2_FUNCS(X)

// Older headers (Debian 12's) lack VK_KHR_cooperative_matrix; the feature then reads as absent.
#ifdef VK_KHR_cooperative_matrix
#define DL_VK_KHR_COOPMAT_FUNCS(X) X(vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)
#else
#define DL_VK_KHR_COOPMAT_FUNCS(X)
#endif
#ifdef VK_NV_cooperative_matrix2
#define DL_VK_NV_COOPMAT2_FUNCS(X) \
    X(vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV)
#else
#define DL_VK_NV_COOPMAT2_FUNCS(X)
#endif

#define DL_VK_DEVICE_FUNCS(X)        \
    X(vkDestroyDevice)               \
    X(vkGetDeviceQueue)              \
    X(vkDeviceWaitIdle)              \
    X(vkQueueSubmit)                 \
    X(vkQueueWaitIdle)               \
    X(vkCreateBuffer)                \
    X(vkDestroyBuffer)               \
    X(vkGetBufferMemoryRequirements) \
    X(vkAllocateMemory)              \
    X(vkFreeMemory)                  \
    X(vkBindBufferMemory)            \
    X(vkMapMemory)                   \
    X(vkUnmapMemory)                 \
    X(vkCreateShaderModule)          \
    X(vkDestroyShaderModule)         \
    X(vkCreateDescriptorSetLayout)   \
    X(vkDestroyDescriptorSetLayout)  \
    X(vkCreatePipelineLayout)        \
    X(vkDestroyPipelineLayout)       \
    X(vkCreateComputePipelines)      \
    X(vkDestroyPipeline)             \
    X(vkCreatePipelineCache)         \
    X(vkDestroyPipelineCache)        \
    X(vkGetPipelineCacheData)        \
    X(vkCreateDescriptorPool)        \
    X(vkDestroyDescriptorPool)       \
    X(vkAllocateDescriptorSets)      \
    X(vkUpdateDescriptorSets)        \
    X(vkCreateCommandPool)           \
    X(vkDestroyCommandPool)          \
    X(vkAllocateCommandBuffers)      \
    X(vkFreeCommandBuffers)          \
    X(vkBeginCommandBuffer)          \
    X(vkEndCommandBuffer)            \
    X(vkResetCommandBuffer)          \
    X(vkCmdBindPipeline)             \
    X(vkCmdBindDescriptorSets)       \
    X(vkCmdPushConstants)            \
    X(vkCmdDispatch)                 \
    X(vkCmdPipelineBarrier)          \
    X(vkCmdCopyBuffer)               \
    X(vkCmdFillBuffer)               \
    X(vkCmdResetQueryPool)           \
    X(vkCmdWriteTimestamp)           \
    X(vkCreateQueryPool)             \
    X(vkDestroyQueryPool)            \
    X(vkGetQueryPoolResults)         \
    X(vkCreateFence)                 \
    X(vkDestroyFence)                \
    X(vkWaitForFences)               \
    X(vkGetFenceStatus)              \
    X(vkResetFences)

#define DL_VK_DECLARE(f) extern PFN_##f f;
DL_VK_GLOBAL_FUNCS(DL_VK_DECLARE)
DL_VK_INSTANCE_FUNCS(DL_VK_DECLARE)
DL_VK_DEVICE_FUNCS(DL_VK_DECLARE)
#undef DL_VK_DECLARE

// A zeroed Vulkan structure with its sType set.
template <typename T>
T make(VkStructureType type) {
    T x{};
    x.sType = type;
    return x;
}

// Opens the loader once; returns "" on success or a sentence saying why Vulkan is unavailable.
std::string load_vulkan();
void load_instance_funcs(VkInstance instance);

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" for messages.
const char* result_name(VkResult r);

}  // namespace dl::vk
