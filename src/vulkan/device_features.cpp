// What a Vulkan device supports: the instance, the query of each physical device, the kernel
// variants, the device listing, and what a device is created with (see device_features.h).
#include "vulkan/device_features.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/log.h"

namespace dl::vk {

namespace spirv {
extern const char* const kVariantsBuilt[];
}

namespace {

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

bool has_extension(const std::vector<VkExtensionProperties>& exts, const char* name) {
    for (const auto& e : exts)
        if (std::strcmp(e.extensionName, name) == 0) return true;
    return false;
}

}  // namespace

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

DeviceQuery query_device(VkPhysicalDevice pd) {
    DeviceQuery q;
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

namespace {

bool has_shape(const std::vector<CoopmatShape>& shapes, uint32_t m, uint32_t n, uint32_t k) {
    return std::any_of(shapes.begin(), shapes.end(),
                       [&](const CoopmatShape& s) { return s.m == m && s.n == n && s.k == k; });
}

}  // namespace

std::string human_bytes(uint64_t b) {
    if (b >= (1ull << 30)) return fmt::format("{:.1f} GiB", b / double(1ull << 30));
    return fmt::format("{:.0f} MiB", b / double(1ull << 20));
}

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

Result<std::vector<DeviceSummary>> list_devices() {
    auto inst = create_instance(false);
    if (!inst) return inst.decline();
    VkInstance instance = inst->instance;
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(instance, &n, nullptr);
    std::vector<VkPhysicalDevice> pds(n);
    vkEnumeratePhysicalDevices(instance, &n, pds.data());
    std::vector<DeviceSummary> out;
    for (uint32_t i = 0; i < n; ++i) out.push_back({(int)i, query_device(pds[i]).f});
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
Enablement::Enablement(const Features& f, bool robust, bool kernel_stats_wanted, bool bounds_checks)
    : chain(f.api_version >= VK_API_VERSION_1_3, f.nv_coopmat, f.khr_coopmat, f.nv_coopmat2),
      executable_properties(make<VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR>(
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR)),
      robustness(make<VkPhysicalDevicePipelineRobustnessFeaturesEXT>(
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_ROBUSTNESS_FEATURES_EXT)) {
    bool v13 = f.api_version >= VK_API_VERSION_1_3;
    VkPhysicalDeviceFeatures2& feats = chain.features;
    VkPhysicalDeviceVulkan11Features& f11 = chain.f11;
    VkPhysicalDeviceVulkan12Features& f12 = chain.f12;
    VkPhysicalDeviceVulkan13Features& f13 = chain.f13;
    feats.features.robustBufferAccess = robust && f.robust_buffer_access;
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
    std::vector<const char*>& exts = extensions;
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
    auto& pe = executable_properties;
    if (kernel_stats_wanted && f.pipeline_statistics) {
        exts.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
        pe.pipelineExecutableInfo = VK_TRUE;
        pe.pNext = feats.pNext;
        feats.pNext = &pe;
        kernel_stats = true;
    }
    auto& pr = robustness;
    if (f.pipeline_robustness && !robust && !bounds_checks) {
        exts.push_back(VK_EXT_PIPELINE_ROBUSTNESS_EXTENSION_NAME);
        pr.pipelineRobustness = VK_TRUE;
        pr.pNext = feats.pNext;
        feats.pNext = &pr;
        unchecked_buffers = true;
    }
}

}  // namespace dl::vk
