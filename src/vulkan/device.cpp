// Vulkan device: opening the chosen device with the features device_features.cpp found,
// buffers and memory, staging copies, submissions, the pipeline cache (see device.h).
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

namespace {

constexpr uint64_t kStagingBytes = 16ull << 20;

std::string expand_home(const std::string& dir) {
    if (dir.size() >= 1 && dir[0] == '~') {
        const char* home = std::getenv("HOME");
        return std::string(home ? home : "") + dir.substr(1);
    }
    return dir;
}

}  // namespace

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
    std::vector<DeviceQuery> qs;
    for (auto pd : pds) qs.push_back(query_device(pd));
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
    DeviceQuery& q = qs[pick];
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
    Enablement enable(f, opts.robust, opts.kernel_stats, opts.bounds_checks);
    d->kernel_stats_ = enable.kernel_stats;
    d->unchecked_buffers_ = enable.unchecked_buffers;
    std::vector<const char*>& exts = enable.extensions;
    float prio = 1.0f;
    auto qi = make<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
    qi.queueFamilyIndex = d->queue_family_;
    qi.queueCount = 1;
    qi.pQueuePriorities = &prio;
    auto di = make<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
    di.pNext = &enable.chain.features;
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
    // within microseconds (docs/perf/history.md, 2026-12-03 night). So poll, for at most spin_us_,
    // then block: a long command (a prefill window) does not keep a core spinning.
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
