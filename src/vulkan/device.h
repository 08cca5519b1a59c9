// A Vulkan compute device: instance, physical-device choice, one compute queue, the features the
// kernels may use (queried, and enabled only where they exist), buffers with staging uploads,
// the on-disk pipeline cache and timestamp queries. Every situation the driver cannot serve is
// returned as a Decline with a sentence, never an assert.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
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

struct DeviceOptions {
    int index = -1;                // -1: best discrete device, then any
    std::string variant = "auto";  // auto, scalar, nv_coopmat, khr_coopmat, nv_coopmat2
    bool validation = false;       // Khronos validation layer; messages are counted
    bool robust = false;           // robustBufferAccess (tests)
    // Keep the driver's own bounds checks on storage buffers. By default, where the device has
    // VK_EXT_pipeline_robustness and robust is off, the pipelines are created without them: every
    // kernel keeps its accesses inside its buffers, and the checks cost instructions on every
    // load (DELTALLM_VK_BOUNDS_CHECKS).
    bool bounds_checks = false;
    std::string pipeline_cache_dir;  // "" disables the on-disk cache
    // Log what the driver's compiler reports of each pipeline (registers ...), where the device
    // has VK_KHR_pipeline_executable_properties (DELTALLM_VK_KERNEL_STATS).
    bool kernel_stats = false;
    // How long a wait for a submitted command polls the fence before it blocks, in microseconds
    // (0: it blocks at once; DELTALLM_VK_WAIT_SPIN_US).
    int64_t wait_spin_us = 20000;
    // Options from the environment (DELTALLM_VK_DEVICE, _VARIANT, _VALIDATION, _KERNEL_STATS,
    // _BOUNDS_CHECKS, _WAIT_SPIN_US, DELTALLM_PIPELINE_CACHE).
    static DeviceOptions from_env();
};

enum class MemoryKind {
    device,     // device-local, filled through staging copies
    host,       // host-visible and coherent (staging, read-back, per-token values), mapped
    host_fast,  // host-visible and, where the device offers it, device-local too (small buffers)
    host_read   // host-visible and, where the device offers it, cached: what the host reads in
                // place, more than once (the logits decode hands out)
};

class Device;

// A buffer with its own memory allocation (large slabs; few of them).
class Buffer {
  public:
    Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Buffer(Buffer&& o) noexcept { *this = std::move(o); }
    Buffer& operator=(Buffer&& o) noexcept;
    ~Buffer() { reset(); }
    void reset();

    VkBuffer handle() const { return buffer_; }
    uint64_t size() const { return size_; }
    void* mapped() const { return mapped_; }  // host kinds only
    explicit operator bool() const { return buffer_ != VK_NULL_HANDLE; }

  private:
    friend class Device;
    VkDevice device_ = VK_NULL_HANDLE;
    VkBuffer buffer_ = VK_NULL_HANDLE;
    VkDeviceMemory memory_ = VK_NULL_HANDLE;
    uint64_t size_ = 0;
    void* mapped_ = nullptr;
};

// A byte range of a buffer, as bound to one shader binding.
struct View {
    VkBuffer buffer = VK_NULL_HANDLE;
    uint64_t offset = 0;
    uint64_t range = 0;
};
// Records a barrier that makes the earlier shader and transfer writes of cb visible to host
// reads once its fence has signalled (a fence alone orders only device accesses).
void record_host_barrier(VkCommandBuffer cb);

inline View view(const Buffer& b) {
    return {b.handle(), 0, b.size()};
}
inline View view(const Buffer& b, uint64_t off, uint64_t range) {
    return {b.handle(), off, range};
}

class Device {
  public:
    // Opens the device the options name; a Decline says why none can be used.
    static Result<std::unique_ptr<Device>> open(
        const DeviceOptions& opts = DeviceOptions::from_env());
    ~Device();
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;

    const Features& features() const { return f_; }
    Variant variant() const { return variant_; }
    int index() const { return index_; }
    std::string name() const;  // "vulkan:0 (NVIDIA H200)"

    // Throws dl::Error (out of device memory, size over the device's limit) with a sentence.
    Buffer create_buffer(uint64_t size, MemoryKind kind);
    // Copies host bytes into a device buffer through the staging buffer (synchronous).
    void upload(const Buffer& dst, uint64_t dst_off, const void* src, uint64_t n);
    void download(const Buffer& src, uint64_t src_off, void* dst, uint64_t n);
    void fill(const Buffer& dst, uint64_t off, uint64_t n, uint32_t word);

    // Runs recorded command buffers, in order, and waits for them. Throws on device loss.
    void submit_and_wait(VkCommandBuffer cb) { submit_and_wait(&cb, 1); }
    void submit_and_wait(const VkCommandBuffer* cbs, uint32_t n);
    // Queues a recorded command buffer without waiting for it: work submitted later on this
    // device's queue (and the barriers recorded in it) runs after it, and a later
    // submit_and_wait returns only once it is done if that work begins with a barrier.
    void submit(VkCommandBuffer cb);
    // Waits until everything submitted to the queue is done.
    void wait_idle();
    VkCommandBuffer allocate_command_buffer();
    void free_command_buffer(VkCommandBuffer cb);

    VkDevice handle() const { return device_; }
    VkPipelineCache pipeline_cache() const { return cache_; }
    // Pipelines are created with their statistics captured (options.kernel_stats, where the
    // device can).
    bool kernel_stats() const { return kernel_stats_; }
    // VK_KHR_pipeline_executable_properties of this device (null where it lacks them).
    PFN_vkGetPipelineExecutablePropertiesKHR executable_properties() const {
        return executable_properties_;
    }
    PFN_vkGetPipelineExecutableStatisticsKHR executable_statistics() const {
        return executable_statistics_;
    }
    // Pipelines are created without the driver's bounds checks on storage buffers (see
    // DeviceOptions::bounds_checks).
    bool unchecked_buffers() const { return unchecked_buffers_; }
    // Validation-layer errors seen so far (only counted when options.validation is on).
    int validation_errors() const { return validation_errors_; }
    // Validation errors of every device this process opened (tests check it once at the end).
    static int validation_errors_all();
    // Whether the validation layer's messages reach this device (options.validation, with the
    // layer installed).
    bool validating() const { return messenger_ != VK_NULL_HANDLE; }
    const std::string& last_validation_message() const { return last_validation_message_; }
    void save_pipeline_cache();
    // The number of buffer b in the order this device created its buffers (0 first), so that a
    // trace of recorded commands names bindings the same way in every run; -1 for a buffer it
    // did not create.
    int64_t buffer_number(VkBuffer b) const;

  private:
    Device() = default;
    static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(
        VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
        const VkDebugUtilsMessengerCallbackDataEXT* data, void* user);
    void one_shot(const std::function<void(VkCommandBuffer)>& record);
    uint32_t memory_type(uint32_t bits, MemoryKind kind) const;

    Features f_;
    Variant variant_ = Variant::scalar;
    int index_ = 0;
    DeviceOptions opts_;
    bool kernel_stats_ = false;
    bool unchecked_buffers_ = false;
    VkInstance instance_ = VK_NULL_HANDLE;
    VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
    // The messenger's destructor as this device's instance gave it: the loader's entry points
    // are those of the last instance made, which may lack the extension.
    PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger_ = nullptr;
    PFN_vkGetPipelineExecutablePropertiesKHR executable_properties_ = nullptr;
    PFN_vkGetPipelineExecutableStatisticsKHR executable_statistics_ = nullptr;
    VkPhysicalDevice physical_ = VK_NULL_HANDLE;
    VkDevice device_ = VK_NULL_HANDLE;
    VkQueue queue_ = VK_NULL_HANDLE;
    uint32_t queue_family_ = 0;
    VkCommandPool pool_ = VK_NULL_HANDLE;
    VkFence fence_ = VK_NULL_HANDLE;
    int64_t spin_us_ = 0;  // DeviceOptions::wait_spin_us
    VkPipelineCache cache_ = VK_NULL_HANDLE;
    std::string cache_path_;
    VkPhysicalDeviceMemoryProperties mem_{};
    Buffer staging_;
    std::mutex mutex_;  // one submission at a time on the queue
    mutable std::mutex numbers_mutex_;
    std::map<VkBuffer, int64_t> buffer_numbers_;  // buffer_number(); a reused handle renumbered
    int64_t buffers_created_ = 0;
    int validation_errors_ = 0;
    std::string last_validation_message_;
};

}  // namespace dl::vk
