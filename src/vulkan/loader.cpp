// Opens libvulkan at run time and fills the entry points the driver uses (see loader.h).
#include "vulkan/loader.h"

#include <dlfcn.h>

#include <mutex>

namespace dl::vk {

#define DL_VK_DEFINE(f) PFN_##f f = nullptr;
DL_VK_GLOBAL_FUNCS(DL_VK_DEFINE)
DL_VK_INSTANCE_FUNCS(DL_VK_DEFINE)
DL_VK_DEVICE_FUNCS(DL_VK_DEFINE)
#undef DL_VK_DEFINE

static PFN_vkGetInstanceProcAddr get_instance_proc = nullptr;

std::string load_vulkan() {
    static std::once_flag once;
    static std::string error;
    std::call_once(once, [] {
        void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            error = "the Vulkan loader (libvulkan.so.1) is not installed";
            return;
        }
        get_instance_proc = (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr");
        if (!get_instance_proc) {
            error = "libvulkan.so.1 has no vkGetInstanceProcAddr";
            return;
        }
#define DL_VK_LOAD(f) f = (PFN_##f)get_instance_proc(nullptr, #f);
        DL_VK_GLOBAL_FUNCS(DL_VK_LOAD)
#undef DL_VK_LOAD
        if (!vkCreateInstance) {
            error = "the Vulkan loader does not provide vkCreateInstance";
            return;
        }
        // The exported functions dispatch on the handle: any device's, whichever instance made
        // it (vkGetDeviceProcAddr's would be one device's).
#define DL_VK_LOAD(f)                                                 \
    f = (PFN_##f)dlsym(lib, #f);                                      \
    if (!f) {                                                         \
        error = "the Vulkan loader does not export Vulkan 1.0's " #f; \
        return;                                                       \
    }
        DL_VK_DEVICE_FUNCS(DL_VK_LOAD)
#undef DL_VK_LOAD
    });
    return error;
}

void load_instance_funcs(VkInstance instance) {
#define DL_VK_LOAD(f) f = (PFN_##f)get_instance_proc(instance, #f);
    DL_VK_INSTANCE_FUNCS(DL_VK_LOAD)
#undef DL_VK_LOAD
}

const char* result_name(VkResult r) {
    switch (r) {
        case VK_SUCCESS:
            return "VK_SUCCESS";
        case VK_NOT_READY:
            return "VK_NOT_READY";
        case VK_TIMEOUT:
            return "VK_TIMEOUT";
        case VK_INCOMPLETE:
            return "VK_INCOMPLETE";
        case VK_ERROR_OUT_OF_HOST_MEMORY:
            return "VK_ERROR_OUT_OF_HOST_MEMORY";
        case VK_ERROR_OUT_OF_DEVICE_MEMORY:
            return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
        case VK_ERROR_INITIALIZATION_FAILED:
            return "VK_ERROR_INITIALIZATION_FAILED";
        case VK_ERROR_DEVICE_LOST:
            return "VK_ERROR_DEVICE_LOST";
        case VK_ERROR_MEMORY_MAP_FAILED:
            return "VK_ERROR_MEMORY_MAP_FAILED";
        case VK_ERROR_LAYER_NOT_PRESENT:
            return "VK_ERROR_LAYER_NOT_PRESENT";
        case VK_ERROR_EXTENSION_NOT_PRESENT:
            return "VK_ERROR_EXTENSION_NOT_PRESENT";
        case VK_ERROR_FEATURE_NOT_PRESENT:
            return "VK_ERROR_FEATURE_NOT_PRESENT";
        case VK_ERROR_INCOMPATIBLE_DRIVER:
            return "VK_ERROR_INCOMPATIBLE_DRIVER";
        case VK_ERROR_TOO_MANY_OBJECTS:
            return "VK_ERROR_TOO_MANY_OBJECTS";
        case VK_ERROR_FORMAT_NOT_SUPPORTED:
            return "VK_ERROR_FORMAT_NOT_SUPPORTED";
        case VK_ERROR_FRAGMENTED_POOL:
            return "VK_ERROR_FRAGMENTED_POOL";
        case VK_ERROR_OUT_OF_POOL_MEMORY:
            return "VK_ERROR_OUT_OF_POOL_MEMORY";
        default:
            return "VkResult error";
    }
}

}  // namespace dl::vk
