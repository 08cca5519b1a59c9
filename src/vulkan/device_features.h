// What a Vulkan device supports and which kernel variant it runs: the features queried from a
// physical device (and the instance that lists the devices), the kernel variants, the listing
// for `deltallm info --devices`, and the feature structures and extensions a device is created
// with (exactly those that exist and are used). device.h opens one device with them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vulkan/decline.h"
#include "vulkan/loader.h"

namespace dl::vk {

// Kernel families, chosen once per device by its features.
enum class Variant { scalar, nv_coopmat, khr_coopmat, nv_coopmat2 };
const char* variant_name(Variant v);
std::optional<Variant> parse_variant(const std::string& s);
// True when this binary carries SPIR-V for the variant (the build's glslc knew its extension).
bool variant_built(Variant v);

struct MemoryHeap {
    uint64_t size = 0;
    bool device_local = false;
};

// A cooperative matrix shape the device offers for F16 × F16 → F32 (M×K times K×N).
struct CoopmatShape {
    uint32_t m = 0, n = 0, k = 0;
};

struct Features {
    std::string name;
    std::string driver;  // driver name and info, as the driver reports them
    uint32_t vendor_id = 0, device_id = 0;
    uint32_t api_version = 0;
    bool discrete = false;
    bool cpu = false;  // a software device such as lavapipe

    // Storage and arithmetic types.
    bool storage_16bit = false;  // storageBuffer16BitAccess
    bool storage_8bit = false;   // storageBuffer8BitAccess
    bool float16 = false;        // shaderFloat16
    bool int8 = false;           // shaderInt8
    bool int64 = false;
    bool int16 = false;  // shaderInt16
    // The Vulkan memory model (the cooperative-matrix modules declare it).
    bool memory_model = false, memory_model_device_scope = false;
    bool integer_dot = false;       // shaderIntegerDotProduct (Vulkan 1.3)
    bool integer_dot_fast = false;  // 4x8-bit packed signed dot products run in hardware
    bool robust_buffer_access = false;

    // Subgroups.
    uint32_t subgroup_size = 0;
    uint32_t min_subgroup_size = 0, max_subgroup_size = 0;
    bool subgroup_size_control = false;
    bool subgroup_arithmetic = false;  // in compute shaders
    bool subgroup_shuffle = false;     // subgroupShuffle / subgroupShuffleXor, compute shaders
    bool subgroup_clustered = false;   // subgroupClustered* reductions, compute shaders

    // Limits.
    uint32_t max_shared_memory = 0;
    uint64_t max_storage_buffer_range = 0;
    uint64_t max_buffer_size = 0;  // maintenance4, else max_storage_buffer_range
    uint32_t min_storage_offset_alignment = 0;
    uint32_t max_workgroup_invocations = 0;
    uint32_t max_workgroup_count[3] = {0, 0, 0};
    uint32_t max_push_constants = 0;
    bool timestamps = false;
    bool pipeline_statistics = false;  // VK_KHR_pipeline_executable_properties
    // VK_EXT_pipeline_robustness: a pipeline may leave out the bounds checks the driver otherwise
    // puts on every storage buffer access (NVIDIA's do, with or without robustBufferAccess).
    bool pipeline_robustness = false;
    uint32_t sm_count = 0;  // streaming multiprocessors (VK_NV_shader_sm_builtins; 0: unknown)
    float timestamp_period_ns = 0;

    // Cooperative matrices.
    bool nv_coopmat = false;
    bool khr_coopmat = false;
    bool nv_coopmat2 = false;
    std::vector<CoopmatShape> khr_f16_shapes;  // subgroup-scope F16×F16→F32 shapes (KHR)
    std::vector<CoopmatShape> nv_f16_shapes;   // the same for the NV extension
    // NV cooperative matrix 2 with workgroup-scope matrices and decode-function (block) loads,
    // which the GEMM tiles over native weight blocks use; they also need buffer device addresses
    // (the decode functions take a reference to the block).
    bool nv_coopmat2_blocks = false;
    bool buffer_device_address = false;
    // Row reductions, per-element operations and accumulator-to-operand conversions on those
    // matrices as well (the window attention keeps its online softmax on them).
    bool nv_coopmat2_softmax = false;
    uint32_t cm2_max_workgroup = 0;  // the largest workgroup of workgroup-scope matrices
    // The granularity of flexible workgroup-scope F16×F16→F32 shapes at 256 invocations (0: none).
    uint32_t cm2_granularity_m = 0, cm2_granularity_n = 0, cm2_granularity_k = 0;

    std::vector<MemoryHeap> heaps;
    uint64_t device_local_bytes = 0;  // the largest device-local heap

    // The best kernel variant this device and this binary support.
    Variant best_variant() const;
    bool supports(Variant v) const;
};

struct DeviceSummary {
    int index = 0;
    Features features;
};

// Every Vulkan device the loader sees, with its features (or a Decline when Vulkan is absent).
Result<std::vector<DeviceSummary>> list_devices();
// A human-readable listing for `deltallm info --devices`.
std::string describe_devices();

// ---- What Device::open (device.cpp) takes from here.

// An instance of the loader, with the debug messenger's extension and the validation layer where
// they were asked for and exist.
struct Instance {
    VkInstance instance = VK_NULL_HANDLE;
    bool debug_utils = false;
    bool validation = false;
};
Result<Instance> create_instance(bool validation);

// Everything the kernels may use, queried from one physical device.
struct DeviceQuery {
    Features f;
    std::vector<VkExtensionProperties> exts;
    uint32_t queue_family = UINT32_MAX;
    uint8_t cache_uuid[VK_UUID_SIZE] = {};
};
DeviceQuery query_device(VkPhysicalDevice pd);

// The feature structures a device is queried and created with, chained behind `features` as far
// as the device has them (all members zero until filled).
struct FeatureChain {
    VkPhysicalDeviceFeatures2 features =
        make<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    VkPhysicalDeviceVulkan11Features f11 = make<VkPhysicalDeviceVulkan11Features>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
    VkPhysicalDeviceVulkan12Features f12 = make<VkPhysicalDeviceVulkan12Features>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
    VkPhysicalDeviceVulkan13Features f13 = make<VkPhysicalDeviceVulkan13Features>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES);
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cm_nv =
        make<VkPhysicalDeviceCooperativeMatrixFeaturesNV>(
            VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV);
#ifdef VK_KHR_cooperative_matrix
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR cm_khr =
        make<VkPhysicalDeviceCooperativeMatrixFeaturesKHR>(
            VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR);
#endif
#ifdef VK_NV_cooperative_matrix2
    VkPhysicalDeviceCooperativeMatrix2FeaturesNV cm2 =
        make<VkPhysicalDeviceCooperativeMatrix2FeaturesNV>(
            VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV);
#endif

    // khr and nv2 are ignored where the headers lack those extensions.
    FeatureChain(bool v13, bool nv, [[maybe_unused]] bool khr, [[maybe_unused]] bool nv2) {
        features.pNext = &f11;
        f11.pNext = &f12;
        void** tail = &f12.pNext;
        auto link = [&](auto& s) {
            *tail = &s;
            tail = &s.pNext;
        };
        if (v13) link(f13);
        if (nv) link(cm_nv);
#ifdef VK_KHR_cooperative_matrix
        if (khr) link(cm_khr);
#endif
#ifdef VK_NV_cooperative_matrix2
        if (nv2) link(cm2);
#endif
    }
    FeatureChain(const FeatureChain&) = delete;
    FeatureChain& operator=(const FeatureChain&) = delete;
};

// What a device with features f is created with: the feature structures, chained behind
// chain.features, and the extensions, exactly those that exist and are used. robust:
// robustBufferAccess (DeviceOptions::robust); kernel_stats: capture the pipelines' statistics
// where the device can (DeviceOptions::kernel_stats); bounds_checks: keep the driver's own
// (DeviceOptions::bounds_checks).
struct Enablement {
    Enablement(const Features& f, bool robust, bool kernel_stats, bool bounds_checks);
    Enablement(const Enablement&) = delete;
    Enablement& operator=(const Enablement&) = delete;

    FeatureChain chain;
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executable_properties;
    VkPhysicalDevicePipelineRobustnessFeaturesEXT robustness;
    std::vector<const char*> extensions;
    bool kernel_stats = false;       // pipelines are created with their statistics captured
    bool unchecked_buffers = false;  // pipelines are created without bounds checks
};

// A size for messages: "1.5 GiB", "16 MiB".
std::string human_bytes(uint64_t b);

}  // namespace dl::vk
