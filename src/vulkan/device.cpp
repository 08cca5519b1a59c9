// Vulkan device: instance, device choice, feature query and enablement, buffers, staging copies,
// pipeline cache (see device.h).
#include "vulkan/device.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

namespace dl::vk {

namespace spirv {
extern const char* const kVariantsBuilt[];
}

namespace {

constexpr uint64_t kStagingBytes = 16ull << 20;

struct Instance {
    VkInstance instance = VK_NULL_HANDLE;
    bool debug_utils = false;
    bool validation = false;
};

// Vulkan's two-call enumeration: the count, then that many structures of type T (sType set).
template <typename T, typename Query>
std::vector<T> enumerate(VkStructureType type, Query query) {
    uint32_t n = 0;
    query(&n, static_cast<T*>(nullptr));
    std::vector<T> v(n, make<T>(type));
    query(&n, v.data());
    v.resize(n);
    return v;
}

// Whether a cooperative-matrix shape multiplies F16 by F16 into F32 (the NV and KHR component
// type enums share their values).
bool f16_into_f32(int a, int b, int c, int result) {
    return a == VK_COMPONENT_TYPE_FLOAT16_NV && b == VK_COMPONENT_TYPE_FLOAT16_NV &&
           c == VK_COMPONENT_TYPE_FLOAT32_NV && result == VK_COMPONENT_TYPE_FLOAT32_NV;
}

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

bool has_extension(const std::vector<VkExtensionProperties>& exts, const char* name) {
    for (const auto& e : exts)
        if (std::strcmp(e.extensionName, name) == 0) return true;
    return false;
}

Result<Instance> create_instance(bool validation) {
    if (std::string e = load_vulkan(); !e.empty()) return Decline{e};
    uint32_t loader_version = VK_API_VERSION_1_0;
    if (vkEnumerateInstanceVersion) vkEnumerateInstanceVersion(&loader_version);
    if (loader_version < VK_API_VERSION_1_2)
        return Decline{fmt::format("the Vulkan loader is version {}.{}, the driver needs 1.2",
                                   VK_API_VERSION_MAJOR(loader_version),
                                   VK_API_VERSION_MINOR(loader_version))};

    uint32_t n = 0;
    vkEnumerateInstanceExtensionProperties(nullptr, &n, nullptr);
    std::vector<VkExtensionProperties> exts(n);
    vkEnumerateInstanceExtensionProperties(nullptr, &n, exts.data());
    Instance out;
    std::vector<const char*> enable;
    std::vector<const char*> layers;
    if (validation) {
        uint32_t nl = 0;
        vkEnumerateInstanceLayerProperties(&nl, nullptr);
        std::vector<VkLayerProperties> ls(nl);
        vkEnumerateInstanceLayerProperties(&nl, ls.data());
        bool found = std::any_of(ls.begin(), ls.end(), [](const VkLayerProperties& l) {
            return std::strcmp(l.layerName, "VK_LAYER_KHRONOS_validation") == 0;
        });
        if (found) {
            layers.push_back("VK_LAYER_KHRONOS_validation");
            out.validation = true;
        } else {
            log::warn(
                "vulkan: validation requested but VK_LAYER_KHRONOS_validation is not installed");
        }
    }
    if (has_extension(exts, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) && validation) {
        enable.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
        out.debug_utils = true;
    }

    auto app = make<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
    app.pApplicationName = "deltallm";
    app.pEngineName = "deltallm";
    app.apiVersion = std::min<uint32_t>(loader_version, VK_API_VERSION_1_3);
    auto ci = make<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
    ci.pApplicationInfo = &app;
    ci.enabledExtensionCount = (uint32_t)enable.size();
    ci.ppEnabledExtensionNames = enable.data();
    ci.enabledLayerCount = (uint32_t)layers.size();
    ci.ppEnabledLayerNames = layers.data();
    VkResult r = vkCreateInstance(&ci, nullptr, &out.instance);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
        return Decline{"no Vulkan driver is installed (no ICD found)"};
    if (r != VK_SUCCESS)
        return Decline{fmt::format("vkCreateInstance failed ({})", result_name(r))};
    load_instance_funcs(out.instance);
    return out;
}

// Everything the kernels may use, queried from one physical device.
struct Query {
    Features f;
    std::vector<VkExtensionProperties> exts;
    uint32_t queue_family = UINT32_MAX;
    uint8_t cache_uuid[VK_UUID_SIZE] = {};
};

// The feature struct of one extension, queried alone.
template <class T>
T extension_features(VkPhysicalDevice pd, VkStructureType type) {
    auto s = make<T>(type);
    auto f2 = make<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    f2.pNext = &s;
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    s.pNext = nullptr;
    return s;
}

Query query(VkPhysicalDevice pd) {
    Query q;
    Features& f = q.f;
    uint32_t n = 0;
    vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr);
    q.exts.resize(n);
    vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, q.exts.data());

    VkPhysicalDeviceProperties base{};
    vkGetPhysicalDeviceProperties(pd, &base);
    f.api_version = base.apiVersion;
    bool v13 = base.apiVersion >= VK_API_VERSION_1_3;

    auto sg = make<VkPhysicalDeviceSubgroupProperties>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
    auto sgc = make<VkPhysicalDeviceSubgroupSizeControlProperties>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES);
    auto drv =
        make<VkPhysicalDeviceDriverProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES);
    auto m4 = make<VkPhysicalDeviceMaintenance4Properties>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES);
    auto idp = make<VkPhysicalDeviceShaderIntegerDotProductProperties>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES);
    auto props = make<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
    props.pNext = &sg;
    sg.pNext = &drv;
    if (v13) {
        drv.pNext = &sgc;
        sgc.pNext = &m4;
        m4.pNext = &idp;
    }
#ifdef VK_NV_cooperative_matrix2
    auto cm2p = make<VkPhysicalDeviceCooperativeMatrix2PropertiesNV>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV);
    if (has_extension(q.exts, VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME)) {
        cm2p.pNext = props.pNext;
        props.pNext = &cm2p;
    }
#endif
    auto smb = make<VkPhysicalDeviceShaderSMBuiltinsPropertiesNV>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV);
    if (has_extension(q.exts, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
        smb.pNext = props.pNext;
        props.pNext = &smb;
    }
    vkGetPhysicalDeviceProperties2(pd, &props);
    f.sm_count = smb.shaderSMCount;
    const VkPhysicalDeviceLimits& lim = base.limits;
    f.name = base.deviceName;
    f.driver = fmt::format("{} {}", drv.driverName, drv.driverInfo);
    f.vendor_id = base.vendorID;
    f.device_id = base.deviceID;
    f.discrete = base.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
    f.cpu = base.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    std::memcpy(q.cache_uuid, base.pipelineCacheUUID, VK_UUID_SIZE);
    f.subgroup_size = sg.subgroupSize;
    f.min_subgroup_size = v13 ? sgc.minSubgroupSize : sg.subgroupSize;
    f.max_subgroup_size = v13 ? sgc.maxSubgroupSize : sg.subgroupSize;
    f.subgroup_arithmetic = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                            (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    f.subgroup_shuffle = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                         (sg.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
    f.subgroup_clustered = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                           (sg.supportedOperations & VK_SUBGROUP_FEATURE_CLUSTERED_BIT);
    f.max_shared_memory = lim.maxComputeSharedMemorySize;
    f.max_storage_buffer_range = lim.maxStorageBufferRange;
    f.max_buffer_size = v13 ? m4.maxBufferSize : lim.maxStorageBufferRange;
    f.min_storage_offset_alignment = (uint32_t)lim.minStorageBufferOffsetAlignment;
    f.max_workgroup_invocations = lim.maxComputeWorkGroupInvocations;
    for (int i = 0; i < 3; ++i) f.max_workgroup_count[i] = lim.maxComputeWorkGroupCount[i];
    f.max_push_constants = lim.maxPushConstantsSize;
    f.timestamp_period_ns = lim.timestampPeriod;

    const bool has_nv = has_extension(q.exts, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
#ifdef VK_KHR_cooperative_matrix
    const bool has_khr = has_extension(q.exts, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
#else
    const bool has_khr = false;
#endif
#ifdef VK_NV_cooperative_matrix2
    const bool has_nv2 = has_extension(q.exts, VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
#else
    const bool has_nv2 = false;
#endif
    FeatureChain chain(v13, has_nv, has_khr, has_nv2);
    const VkPhysicalDeviceFeatures2& feats = chain.features;
    const VkPhysicalDeviceVulkan11Features& f11 = chain.f11;
    const VkPhysicalDeviceVulkan12Features& f12 = chain.f12;
    const VkPhysicalDeviceVulkan13Features& f13 = chain.f13;
    const auto& cm_nv = chain.cm_nv;
#ifdef VK_KHR_cooperative_matrix
    const auto& cm_khr = chain.cm_khr;
#endif
#ifdef VK_NV_cooperative_matrix2
    const auto& cm2 = chain.cm2;
#endif
    vkGetPhysicalDeviceFeatures2(pd, &chain.features);
    f.robust_buffer_access = feats.features.robustBufferAccess;
    f.int64 = feats.features.shaderInt64;
    f.int16 = feats.features.shaderInt16;
    f.memory_model = f12.vulkanMemoryModel;
    f.memory_model_device_scope = f12.vulkanMemoryModelDeviceScope;
    f.storage_16bit = f11.storageBuffer16BitAccess;
    f.storage_8bit = f12.storageBuffer8BitAccess;
    f.float16 = f12.shaderFloat16;
    f.int8 = f12.shaderInt8;
    f.subgroup_size_control = v13 && f13.subgroupSizeControl && f13.computeFullSubgroups;
    // Integer dot products are core in Vulkan 1.3 (the feature must be enabled to be used).
    f.integer_dot = v13 && f13.shaderIntegerDotProduct;
    f.integer_dot_fast = f.integer_dot && idp.integerDotProduct4x8BitPackedSignedAccelerated;
    f.timestamps = lim.timestampComputeAndGraphics;
    if (has_extension(q.exts, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME))
        f.pipeline_statistics =
            extension_features<VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR>(
                pd, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR)
                .pipelineExecutableInfo;
    if (has_extension(q.exts, VK_EXT_PIPELINE_ROBUSTNESS_EXTENSION_NAME))
        f.pipeline_robustness =
            extension_features<VkPhysicalDevicePipelineRobustnessFeaturesEXT>(
                pd, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_ROBUSTNESS_FEATURES_EXT)
                .pipelineRobustness;

    if (has_nv && cm_nv.cooperativeMatrix && vkGetPhysicalDeviceCooperativeMatrixPropertiesNV) {
        for (const auto& p : enumerate<VkCooperativeMatrixPropertiesNV>(
                 VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV, [&](uint32_t*n, auto*out) {
                     vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(pd, n, out);
                 }))
            if (f16_into_f32(p.AType, p.BType, p.CType, p.DType) && p.scope == VK_SCOPE_SUBGROUP_NV)
                f.nv_f16_shapes.push_back({p.MSize, p.NSize, p.KSize});
        f.nv_coopmat = true;
    }
#ifdef VK_KHR_cooperative_matrix
    if (has_khr && cm_khr.cooperativeMatrix && vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR) {
        for (const auto& p : enumerate<VkCooperativeMatrixPropertiesKHR>(
                 VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR, [&](uint32_t*n, auto*out) {
                     vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(pd, n, out);
                 }))
            if (f16_into_f32(p.AType, p.BType, p.CType, p.ResultType) &&
                p.scope == VK_SCOPE_SUBGROUP_KHR)
                f.khr_f16_shapes.push_back({p.MSize, p.NSize, p.KSize});
        f.khr_coopmat = true;
    }
#endif
#ifdef VK_NV_cooperative_matrix2
    f.nv_coopmat2 =
        has_nv2 && cm2.cooperativeMatrixTensorAddressing && cm2.cooperativeMatrixFlexibleDimensions;
    f.buffer_device_address = f12.bufferDeviceAddress;
    f.nv_coopmat2_blocks = f.nv_coopmat2 && f.int16 && cm2.cooperativeMatrixWorkgroupScope &&
                           cm2.cooperativeMatrixBlockLoads && f.buffer_device_address;
    f.nv_coopmat2_softmax = f.nv_coopmat2_blocks && cm2.cooperativeMatrixReductions &&
                            cm2.cooperativeMatrixPerElementOperations &&
                            cm2.cooperativeMatrixConversions;
    if (f.nv_coopmat2) f.cm2_max_workgroup = cm2p.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
    if (f.nv_coopmat2_blocks &&
        vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV) {
        for (const auto& p : enumerate<VkCooperativeMatrixFlexibleDimensionsPropertiesNV>(
                 VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV,
                 [&](uint32_t*n, auto*out) {
                     vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV(pd, n, out);
                 }))
            if (f16_into_f32(p.AType, p.BType, p.CType, p.ResultType) &&
                p.scope == VK_SCOPE_WORKGROUP_KHR && p.workgroupInvocations == 256) {
                f.cm2_granularity_m = p.MGranularity;
                f.cm2_granularity_n = p.NGranularity;
                f.cm2_granularity_k = p.KGranularity;
            }
    }
#endif

    VkPhysicalDeviceMemoryProperties mem{};
    vkGetPhysicalDeviceMemoryProperties(pd, &mem);
    for (uint32_t i = 0; i < mem.memoryHeapCount; ++i) {
        bool local = mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
        f.heaps.push_back({mem.memoryHeaps[i].size, local});
        if (local)
            f.device_local_bytes =
                std::max<uint64_t>(f.device_local_bytes, mem.memoryHeaps[i].size);
    }

    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> qs(nq);
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qs.data());
    // Prefer a compute queue without graphics (a dedicated compute engine), else any compute queue.
    for (uint32_t i = 0; i < nq; ++i)
        if ((qs[i].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
            !(qs[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) {
            q.queue_family = i;
            break;
        }
    if (q.queue_family == UINT32_MAX)
        for (uint32_t i = 0; i < nq; ++i)
            if (qs[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
                q.queue_family = i;
                break;
            }
    if (q.queue_family != UINT32_MAX && qs[q.queue_family].timestampValidBits == 0)
        f.timestamps = false;
    return q;
}

bool has_shape(const std::vector<CoopmatShape>& shapes, uint32_t m, uint32_t n, uint32_t k) {
    return std::any_of(shapes.begin(), shapes.end(),
                       [&](const CoopmatShape& s) { return s.m == m && s.n == n && s.k == k; });
}

std::string expand_home(const std::string& dir) {
    if (dir.size() >= 1 && dir[0] == '~') {
        const char* home = std::getenv("HOME");
        return std::string(home ? home : "") + dir.substr(1);
    }
    return dir;
}

std::string human_bytes(uint64_t b) {
    if (b >= (1ull << 30)) return fmt::format("{:.1f} GiB", b / double(1ull << 30));
    return fmt::format("{:.0f} MiB", b / double(1ull << 20));
}

}  // namespace

const char* variant_name(Variant v) {
    switch (v) {
        case Variant::scalar:
            return "scalar";
        case Variant::nv_coopmat:
            return "nv_coopmat";
        case Variant::khr_coopmat:
            return "khr_coopmat";
        case Variant::nv_coopmat2:
            return "nv_coopmat2";
    }
    return "?";
}

std::optional<Variant> parse_variant(const std::string& s) {
    for (Variant v :
         {Variant::scalar, Variant::nv_coopmat, Variant::khr_coopmat, Variant::nv_coopmat2})
        if (s == variant_name(v)) return v;
    return std::nullopt;
}

bool variant_built(Variant v) {
    for (const char* const* p = spirv::kVariantsBuilt; *p; ++p)
        if (std::strcmp(*p, variant_name(v)) == 0) return true;
    return false;
}

bool Features::supports(Variant v) const {
    if (!variant_built(v)) return false;
    bool f16 = storage_16bit && float16;
    switch (v) {
        case Variant::scalar:
            return true;
        // The cooperative-matrix modules declare the Vulkan memory model.
        case Variant::nv_coopmat:
            return f16 && memory_model && nv_coopmat && has_shape(nv_f16_shapes, 16, 16, 16);
        case Variant::khr_coopmat:
            return f16 && memory_model && khr_coopmat && has_shape(khr_f16_shapes, 16, 16, 16);
        case Variant::nv_coopmat2:
            return f16 && memory_model && nv_coopmat2 && khr_coopmat &&
                   has_shape(khr_f16_shapes, 16, 16, 16);
    }
    return false;
}

Variant Features::best_variant() const {
    for (Variant v : {Variant::nv_coopmat2, Variant::khr_coopmat, Variant::nv_coopmat})
        if (supports(v)) return v;
    return Variant::scalar;
}

DeviceOptions DeviceOptions::from_env() {
    DeviceOptions o;
    o.index = (int)env::get_int("DELTALLM_VK_DEVICE");
    o.variant = env::get_string("DELTALLM_VK_VARIANT");
    o.validation = env::get_bool("DELTALLM_VK_VALIDATION");
    o.kernel_stats = env::get_bool("DELTALLM_VK_KERNEL_STATS");
    o.bounds_checks = env::get_bool("DELTALLM_VK_BOUNDS_CHECKS");
    o.pipeline_cache_dir = env::get_string("DELTALLM_PIPELINE_CACHE");
    o.wait_spin_us = env::get_int("DELTALLM_VK_WAIT_SPIN_US");
    if (o.wait_spin_us < 0) fail("DELTALLM_VK_WAIT_SPIN_US={}: use 0 or more", o.wait_spin_us);
    return o;
}

Result<std::vector<DeviceSummary>> list_devices() {
    auto inst = create_instance(false);
    if (!inst) return inst.decline();
    VkInstance instance = inst->instance;
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(instance, &n, nullptr);
    std::vector<VkPhysicalDevice> pds(n);
    vkEnumeratePhysicalDevices(instance, &n, pds.data());
    std::vector<DeviceSummary> out;
    for (uint32_t i = 0; i < n; ++i) out.push_back({(int)i, query(pds[i]).f});
    vkDestroyInstance(instance, nullptr);
    return out;
}

std::string describe_devices() {
    auto devs = list_devices();
    if (!devs) return "Vulkan: unavailable: " + devs.reason() + "\n";
    if (devs->empty()) return "Vulkan: no devices\n";
    std::string out;
    for (const DeviceSummary& d : *devs) {
        const Features& f = d.features;
        out += fmt::format("vulkan:{}  {} ({}), Vulkan {}.{}.{}, driver {}\n", d.index, f.name,
                           f.discrete ? "discrete" : (f.cpu ? "cpu" : "other"),
                           VK_API_VERSION_MAJOR(f.api_version), VK_API_VERSION_MINOR(f.api_version),
                           VK_API_VERSION_PATCH(f.api_version), f.driver);
        out +=
            fmt::format("  memory: {} device-local; max storage buffer range {}\n",
                        human_bytes(f.device_local_bytes), human_bytes(f.max_storage_buffer_range));
        out += fmt::format(
            "  subgroup {} (min {}, max {}{}), shared memory {} KiB, workgroup <= {} invocations\n",
            f.subgroup_size, f.min_subgroup_size, f.max_subgroup_size,
            f.subgroup_size_control ? ", size control" : "", f.max_shared_memory / 1024,
            f.max_workgroup_invocations);
        out += fmt::format(
            "  16-bit storage {}, float16 {}, int8 {}, integer dot {}, timestamps {}\n",
            f.storage_16bit ? "yes" : "no", f.float16 ? "yes" : "no", f.int8 ? "yes" : "no",
            f.integer_dot ? (f.integer_dot_fast ? "yes (accelerated)" : "yes") : "no",
            f.timestamps ? "yes" : "no");
        out += fmt::format(
            "  cooperative matrix: NV {}, KHR {}, NV2 {}{}\n", f.nv_coopmat ? "yes" : "no",
            f.khr_coopmat ? "yes" : "no", f.nv_coopmat2 ? "yes" : "no",
            f.nv_coopmat2_blocks
                ? fmt::format(" (workgroup block loads{}, up to {} invocations, "
                              "granularity {}x{}x{})",
                              f.nv_coopmat2_softmax ? ", reductions" : "", f.cm2_max_workgroup,
                              f.cm2_granularity_m, f.cm2_granularity_n, f.cm2_granularity_k)
                : "");
        std::string vs;
        for (Variant v :
             {Variant::scalar, Variant::nv_coopmat, Variant::khr_coopmat, Variant::nv_coopmat2})
            if (f.supports(v)) vs += std::string(vs.empty() ? "" : ", ") + variant_name(v);
        out += fmt::format("  kernel variants usable: {} (chosen: {})\n", vs,
                           variant_name(f.best_variant()));
    }
    return out;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
    if (this != &o) {
        reset();
        device_ = std::exchange(o.device_, VK_NULL_HANDLE);
        buffer_ = std::exchange(o.buffer_, VK_NULL_HANDLE);
        memory_ = std::exchange(o.memory_, VK_NULL_HANDLE);
        size_ = std::exchange(o.size_, 0);
        mapped_ = std::exchange(o.mapped_, nullptr);
    }
    return *this;
}

void Buffer::reset() {
    if (buffer_) vkDestroyBuffer(device_, buffer_, nullptr);
    if (memory_) vkFreeMemory(device_, memory_, nullptr);
    buffer_ = VK_NULL_HANDLE;
    memory_ = VK_NULL_HANDLE;
    mapped_ = nullptr;
    size_ = 0;
}

namespace {
std::atomic<int> g_validation_errors{0};
}  // namespace

int Device::validation_errors_all() {
    return g_validation_errors.load();
}

VKAPI_ATTR VkBool32 VKAPI_CALL Device::on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                  VkDebugUtilsMessageTypeFlagsEXT,
                                                  const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                  void* user) {
    auto* d = static_cast<Device*>(user);
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
        ++d->validation_errors_;
        ++g_validation_errors;
        d->last_validation_message_ = data->pMessage ? data->pMessage : "";
        log::error("vulkan validation: {}", d->last_validation_message_);
    } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        log::warn("vulkan validation: {}", data->pMessage ? data->pMessage : "");
    }
    return VK_FALSE;
}

Result<std::unique_ptr<Device>> Device::open(const DeviceOptions& opts) {
    auto inst = create_instance(opts.validation);
    if (!inst) return inst.decline();
    std::unique_ptr<Device> d(new Device());
    d->opts_ = opts;
    d->instance_ = inst->instance;
    if (inst->debug_utils && vkCreateDebugUtilsMessengerEXT) {
        auto mi = make<VkDebugUtilsMessengerCreateInfoEXT>(
            VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT);
        mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                             VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
        mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
        mi.pfnUserCallback = &Device::on_message;
        mi.pUserData = d.get();
        vkCreateDebugUtilsMessengerEXT(d->instance_, &mi, nullptr, &d->messenger_);
        d->destroy_messenger_ = vkDestroyDebugUtilsMessengerEXT;
    }

    uint32_t n = 0;
    vkEnumeratePhysicalDevices(d->instance_, &n, nullptr);
    std::vector<VkPhysicalDevice> pds(n);
    vkEnumeratePhysicalDevices(d->instance_, &n, pds.data());
    if (n == 0) return Decline{"no Vulkan device is present"};
    std::vector<Query> qs;
    for (auto pd : pds) qs.push_back(query(pd));
    int pick = opts.index;
    if (pick >= (int)n)
        return Decline{fmt::format("Vulkan device {} does not exist ({} present)", pick, n)};
    if (pick < 0) {
        // Best: a discrete GPU with the most memory, then any GPU, then a CPU device.
        auto rank = [&](int i) {
            const Features& f = qs[i].f;
            return (f.discrete ? 2 : f.cpu ? 0 : 1) * 1e15 + (double)f.device_local_bytes;
        };
        pick = 0;
        for (int i = 1; i < (int)n; ++i)
            if (rank(i) > rank(pick)) pick = i;
    }
    Query& q = qs[pick];
    d->index_ = pick;
    d->physical_ = pds[pick];
    d->f_ = q.f;
    const Features& f = d->f_;
    if (f.api_version < VK_API_VERSION_1_2)
        return Decline{fmt::format("{} supports Vulkan {}.{}; the driver needs 1.2", f.name,
                                   VK_API_VERSION_MAJOR(f.api_version),
                                   VK_API_VERSION_MINOR(f.api_version))};
    if (q.queue_family == UINT32_MAX)
        return Decline{fmt::format("{} has no compute queue", f.name)};
    d->queue_family_ = q.queue_family;

    if (opts.variant == "auto") {
        d->variant_ = f.best_variant();
    } else {
        auto v = parse_variant(opts.variant);
        if (!v)
            return Decline{fmt::format(
                "unknown kernel variant '{}' (use auto, scalar, nv_coopmat, khr_coopmat or "
                "nv_coopmat2)",
                opts.variant)};
        if (!variant_built(*v))
            return Decline{fmt::format(
                "kernel variant {} was not built (the build's glslc lacks its extension)",
                opts.variant)};
        if (!f.supports(*v))
            return Decline{
                fmt::format("{} does not support kernel variant {}", f.name, opts.variant)};
        d->variant_ = *v;
    }

    // Enable exactly what exists and is used.
    bool v13 = f.api_version >= VK_API_VERSION_1_3;
    FeatureChain chain(v13, f.nv_coopmat, f.khr_coopmat, f.nv_coopmat2);
    VkPhysicalDeviceFeatures2& feats = chain.features;
    VkPhysicalDeviceVulkan11Features& f11 = chain.f11;
    VkPhysicalDeviceVulkan12Features& f12 = chain.f12;
    VkPhysicalDeviceVulkan13Features& f13 = chain.f13;
    feats.features.robustBufferAccess = opts.robust && f.robust_buffer_access;
    feats.features.shaderInt64 = f.int64;
    feats.features.shaderInt16 = f.int16;
    f11.storageBuffer16BitAccess = f.storage_16bit;
    f12.storageBuffer8BitAccess = f.storage_8bit;
    f12.shaderFloat16 = f.float16;
    f12.shaderInt8 = f.int8;
    // Only the block-decoding GEMM tiles take buffer addresses (inside the decode functions).
    f12.bufferDeviceAddress = f.nv_coopmat2_blocks;
    f12.vulkanMemoryModel = f.memory_model;
    f12.vulkanMemoryModelDeviceScope = f.memory_model_device_scope;
    if (v13) {
        f13.subgroupSizeControl = f.subgroup_size_control;
        f13.computeFullSubgroups = f.subgroup_size_control;
        f13.maintenance4 = VK_TRUE;
        f13.shaderIntegerDotProduct = f.integer_dot;
    }
    std::vector<const char*> exts;
    if (f.nv_coopmat) {
        exts.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
        chain.cm_nv.cooperativeMatrix = VK_TRUE;
    }
#ifdef VK_KHR_cooperative_matrix
    if (f.khr_coopmat) {
        exts.push_back(VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
        chain.cm_khr.cooperativeMatrix = VK_TRUE;
    }
#endif
#ifdef VK_NV_cooperative_matrix2
    if (f.nv_coopmat2) {
        auto& cm2 = chain.cm2;
        exts.push_back(VK_NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME);
        cm2.cooperativeMatrixTensorAddressing = VK_TRUE;
        cm2.cooperativeMatrixFlexibleDimensions = VK_TRUE;
        cm2.cooperativeMatrixWorkgroupScope = f.nv_coopmat2_blocks;
        cm2.cooperativeMatrixBlockLoads = f.nv_coopmat2_blocks;
        cm2.cooperativeMatrixReductions = f.nv_coopmat2_softmax;
        cm2.cooperativeMatrixPerElementOperations = f.nv_coopmat2_softmax;
        cm2.cooperativeMatrixConversions = f.nv_coopmat2_softmax;
    }
#endif
    auto pe = make<VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR);
    if (opts.kernel_stats && f.pipeline_statistics) {
        exts.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
        pe.pipelineExecutableInfo = VK_TRUE;
        pe.pNext = feats.pNext;
        feats.pNext = &pe;
        d->kernel_stats_ = true;
    }
    auto pr = make<VkPhysicalDevicePipelineRobustnessFeaturesEXT>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_ROBUSTNESS_FEATURES_EXT);
    if (f.pipeline_robustness && !opts.robust && !opts.bounds_checks) {
        exts.push_back(VK_EXT_PIPELINE_ROBUSTNESS_EXTENSION_NAME);
        pr.pipelineRobustness = VK_TRUE;
        pr.pNext = feats.pNext;
        feats.pNext = &pr;
        d->unchecked_buffers_ = true;
    }
    float prio = 1.0f;
    auto qi = make<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
    qi.queueFamilyIndex = d->queue_family_;
    qi.queueCount = 1;
    qi.pQueuePriorities = &prio;
    auto di = make<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
    di.pNext = &feats;
    di.queueCreateInfoCount = 1;
    di.pQueueCreateInfos = &qi;
    di.enabledExtensionCount = (uint32_t)exts.size();
    di.ppEnabledExtensionNames = exts.data();
    VkResult r = vkCreateDevice(d->physical_, &di, nullptr, &d->device_);
    if (r != VK_SUCCESS)
        return Decline{fmt::format("vkCreateDevice on {} failed ({})", f.name, result_name(r))};
    d->executable_properties_ = (PFN_vkGetPipelineExecutablePropertiesKHR)vkGetDeviceProcAddr(
        d->device_, "vkGetPipelineExecutablePropertiesKHR");
    d->executable_statistics_ = (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(
        d->device_, "vkGetPipelineExecutableStatisticsKHR");
    vkGetDeviceQueue(d->device_, d->queue_family_, 0, &d->queue_);
    vkGetPhysicalDeviceMemoryProperties(d->physical_, &d->mem_);

    auto pi = make<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pi.queueFamilyIndex = d->queue_family_;
    if (vkCreateCommandPool(d->device_, &pi, nullptr, &d->pool_) != VK_SUCCESS)
        return Decline{"cannot create a Vulkan command pool"};
    auto fi = make<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
    vkCreateFence(d->device_, &fi, nullptr, &d->fence_);
    d->spin_us_ = opts.wait_spin_us;

    // Pipeline cache: the file is keyed by vendor, device and the driver's cache UUID.
    std::vector<char> blob;
    if (!opts.pipeline_cache_dir.empty()) {
        std::string uuid;
        for (uint8_t b : q.cache_uuid) uuid += fmt::format("{:02x}", b);
        d->cache_path_ =
            fmt::format("{}/vulkan-{:04x}-{:04x}-{}.cache", expand_home(opts.pipeline_cache_dir),
                        f.vendor_id, f.device_id, uuid);
        std::ifstream in(d->cache_path_, std::ios::binary);
        if (in) blob.assign(std::istreambuf_iterator<char>(in), {});
        // Header version one: length, version, vendor, device, UUID. Anything else is ignored.
        if (blob.size() >= 16 + VK_UUID_SIZE) {
            uint32_t h[4];
            std::memcpy(h, blob.data(), 16);
            if (h[0] < 16 + VK_UUID_SIZE || h[1] != VK_PIPELINE_CACHE_HEADER_VERSION_ONE ||
                h[2] != f.vendor_id || h[3] != f.device_id ||
                std::memcmp(blob.data() + 16, q.cache_uuid, VK_UUID_SIZE) != 0)
                blob.clear();
        } else {
            blob.clear();
        }
    }
    auto ci = make<VkPipelineCacheCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO);
    ci.initialDataSize = blob.size();
    ci.pInitialData = blob.empty() ? nullptr : blob.data();
    if (vkCreatePipelineCache(d->device_, &ci, nullptr, &d->cache_) != VK_SUCCESS) {
        ci.initialDataSize = 0;
        ci.pInitialData = nullptr;
        vkCreatePipelineCache(d->device_, &ci, nullptr, &d->cache_);
    }

    d->staging_ = d->create_buffer(kStagingBytes, MemoryKind::host);
    log::debug("vulkan: {} ({}), variant {}{}", d->name(), f.driver, variant_name(d->variant_),
               d->unchecked_buffers_ ? ", storage buffers without bounds checks" : "");
    return d;
}

Device::~Device() {
    if (device_) {
        vkDeviceWaitIdle(device_);
        save_pipeline_cache();
        staging_.reset();
        if (cache_) vkDestroyPipelineCache(device_, cache_, nullptr);
        if (fence_) vkDestroyFence(device_, fence_, nullptr);
        if (pool_) vkDestroyCommandPool(device_, pool_, nullptr);
        vkDestroyDevice(device_, nullptr);
    }
    if (messenger_ && destroy_messenger_) destroy_messenger_(instance_, messenger_, nullptr);
    if (instance_) vkDestroyInstance(instance_, nullptr);
}

std::string Device::name() const {
    return fmt::format("vulkan:{} ({})", index_, f_.name);
}

void Device::save_pipeline_cache() {
    if (cache_path_.empty() || !cache_) return;
    size_t n = 0;
    if (vkGetPipelineCacheData(device_, cache_, &n, nullptr) != VK_SUCCESS || n == 0) return;
    std::vector<char> blob(n);
    if (vkGetPipelineCacheData(device_, cache_, &n, blob.data()) != VK_SUCCESS) return;
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(cache_path_).parent_path(), ec);
    std::string tmp = cache_path_ + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary);
        if (!out) return;  // a cache that cannot be written only costs compile time
        out.write(blob.data(), (std::streamsize)n);
    }
    std::filesystem::rename(tmp, cache_path_, ec);
}

uint32_t Device::memory_type(uint32_t bits, MemoryKind kind) const {
    auto find = [&](VkMemoryPropertyFlags want) -> uint32_t {
        for (uint32_t i = 0; i < mem_.memoryTypeCount; ++i)
            if ((bits & (1u << i)) && (mem_.memoryTypes[i].propertyFlags & want) == want) return i;
        return UINT32_MAX;
    };
    const VkMemoryPropertyFlags host =
        VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    switch (kind) {
        case MemoryKind::device: {
            uint32_t t = find(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
            return t != UINT32_MAX ? t : find(0);
        }
        case MemoryKind::host:
            return find(host);
        case MemoryKind::host_fast: {
            uint32_t t = find(host | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
            return t != UINT32_MAX ? t : find(host);
        }
        case MemoryKind::host_read: {
            uint32_t t = find(host | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
            return t != UINT32_MAX ? t : find(host);
        }
    }
    return UINT32_MAX;
}

Buffer Device::create_buffer(uint64_t size, MemoryKind kind) {
    if (size == 0) size = 4;
    if (size > f_.max_buffer_size && f_.max_buffer_size > 0)
        fail("a Vulkan buffer of {} exceeds {}'s limit of {}", human_bytes(size), f_.name,
             human_bytes(f_.max_buffer_size));
    Buffer b;
    b.device_ = device_;
    b.size_ = size;
    auto bi = make<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
    bi.size = size;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    if (f_.nv_coopmat2_blocks) bi.usage |= VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
    bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkResult r = vkCreateBuffer(device_, &bi, nullptr, &b.buffer_);
    if (r != VK_SUCCESS)
        fail("cannot create a Vulkan buffer of {} ({})", human_bytes(size), result_name(r));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device_, b.buffer_, &req);
    uint32_t type = memory_type(req.memoryTypeBits, kind);
    if (type == UINT32_MAX) fail("{} has no suitable memory type for a buffer", f_.name);
    auto ai = make<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = type;
    auto flags = make<VkMemoryAllocateFlagsInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO);
    flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    if (f_.nv_coopmat2_blocks) ai.pNext = &flags;
    r = vkAllocateMemory(device_, &ai, nullptr, &b.memory_);
    if (r != VK_SUCCESS)
        fail("out of memory on {}: cannot allocate {} ({})", f_.name, human_bytes(req.size),
             result_name(r));
    vkBindBufferMemory(device_, b.buffer_, b.memory_, 0);
    if (kind != MemoryKind::device) {
        r = vkMapMemory(device_, b.memory_, 0, VK_WHOLE_SIZE, 0, &b.mapped_);
        if (r != VK_SUCCESS) fail("cannot map a Vulkan buffer ({})", result_name(r));
    }
    std::lock_guard lock(numbers_mutex_);
    buffer_numbers_[b.buffer_] = buffers_created_++;
    return b;
}

int64_t Device::buffer_number(VkBuffer b) const {
    std::lock_guard lock(numbers_mutex_);
    auto it = buffer_numbers_.find(b);
    return it == buffer_numbers_.end() ? -1 : it->second;
}

VkCommandBuffer Device::allocate_command_buffer() {
    auto ai = make<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    VkCommandBuffer cb = VK_NULL_HANDLE;
    std::lock_guard lock(mutex_);
    if (vkAllocateCommandBuffers(device_, &ai, &cb) != VK_SUCCESS)
        fail("cannot allocate a Vulkan command buffer");
    return cb;
}

void Device::free_command_buffer(VkCommandBuffer cb) {
    std::lock_guard lock(mutex_);
    vkFreeCommandBuffers(device_, pool_, 1, &cb);
}

void Device::submit(VkCommandBuffer cb) {
    std::lock_guard lock(mutex_);
    auto si = make<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cb;
    VkResult r = vkQueueSubmit(queue_, 1, &si, VK_NULL_HANDLE);
    if (r != VK_SUCCESS) fail("Vulkan queue submit failed on {} ({})", f_.name, result_name(r));
}

void Device::wait_idle() {
    std::lock_guard lock(mutex_);
    VkResult r = vkQueueWaitIdle(queue_);
    if (r != VK_SUCCESS) fail("waiting for {} failed ({})", f_.name, result_name(r));
}

void Device::submit_and_wait(const VkCommandBuffer* cbs, uint32_t n) {
    std::lock_guard lock(mutex_);
    auto si = make<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
    si.commandBufferCount = n;
    si.pCommandBuffers = cbs;
    VkResult r = vkQueueSubmit(queue_, 1, &si, fence_);
    if (r != VK_SUCCESS) fail("Vulkan queue submit failed on {} ({})", f_.name, result_name(r));
    // The driver's blocking wait wakes this thread 0.1-0.25 ms after the device signals the
    // fence (an H200: a tenth of a 9B's decoded token), where polling the fence's status sees it
    // within microseconds (docs/PERF.md, 2026-12-03 night). So poll, for at most spin_us_, then
    // block: a long command (a prefill window) does not keep a core spinning.
    r = VK_NOT_READY;
    if (spin_us_ > 0) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us_);
        while ((r = vkGetFenceStatus(device_, fence_)) == VK_NOT_READY &&
               std::chrono::steady_clock::now() < until) {
        }
    }
    if (r == VK_NOT_READY) r = vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX);
    vkResetFences(device_, 1, &fence_);
    if (r != VK_SUCCESS) fail("waiting for {} failed ({})", f_.name, result_name(r));
}

void Device::one_shot(const std::function<void(VkCommandBuffer)>& record) {
    VkCommandBuffer cb = allocate_command_buffer();
    auto bi = make<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vkBeginCommandBuffer(cb, &bi);
    record(cb);
    vkEndCommandBuffer(cb);
    try {
        submit_and_wait(cb);
    } catch (...) {
        free_command_buffer(cb);
        throw;
    }
    free_command_buffer(cb);
}

void Device::upload(const Buffer& dst, uint64_t dst_off, const void* src, uint64_t n) {
    DL_ASSERT(dst_off + n <= dst.size());
    if (dst.mapped()) {
        std::memcpy((char*)dst.mapped() + dst_off, src, n);
        return;
    }
    const char* p = static_cast<const char*>(src);
    for (uint64_t done = 0; done < n;) {
        uint64_t chunk = std::min<uint64_t>(n - done, staging_.size());
        std::memcpy(staging_.mapped(), p + done, chunk);
        one_shot([&](VkCommandBuffer cb) {
            VkBufferCopy c{0, dst_off + done, chunk};
            vkCmdCopyBuffer(cb, staging_.handle(), dst.handle(), 1, &c);
        });
        done += chunk;
    }
}

void Device::download(const Buffer& src, uint64_t src_off, void* dst, uint64_t n) {
    DL_ASSERT(src_off + n <= src.size());
    if (src.mapped()) {
        std::memcpy(dst, (const char*)src.mapped() + src_off, n);
        return;
    }
    char* p = static_cast<char*>(dst);
    for (uint64_t done = 0; done < n;) {
        uint64_t chunk = std::min<uint64_t>(n - done, staging_.size());
        one_shot([&](VkCommandBuffer cb) {
            VkBufferCopy c{src_off + done, 0, chunk};
            vkCmdCopyBuffer(cb, src.handle(), staging_.handle(), 1, &c);
            record_host_barrier(cb);
        });
        std::memcpy(p + done, staging_.mapped(), chunk);
        done += chunk;
    }
}

void record_host_barrier(VkCommandBuffer cb) {
    auto mb = make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void Device::fill(const Buffer& dst, uint64_t off, uint64_t n, uint32_t word) {
    one_shot([&](VkCommandBuffer cb) { vkCmdFillBuffer(cb, dst.handle(), off, n, word); });
}

}  // namespace dl::vk
