// A Vulkan compute device: physical-device choice, one compute queue with the features the
// kernels may use enabled (device_features.h says what they are and how they are found), buffers
// with staging uploads, the on-disk pipeline cache and timestamp queries. Every situation the
// driver cannot serve is returned as a Decline with a sentence, never an assert.
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
#include "vulkan/device_features.h"
#include "vulkan/loader.h"

namespace dl::vk {

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
