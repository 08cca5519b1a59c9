// Pipelines from embedded SPIR-V, and command lists with their descriptor sets (see pipeline.h).
#include "vulkan/pipeline.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstring>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

namespace dl::vk {

namespace spirv {
struct Module {
    const char* name;
    const uint32_t* words;
    size_t n_words;
};
extern const Module kModules[];
extern const char* const kCompiler;
}  // namespace spirv

std::span<const uint32_t> find_module(const std::string& name) {
    for (const spirv::Module* m = spirv::kModules; m->name; ++m)
        if (name == m->name) return {m->words, m->n_words};
    return {};
}

const char* shader_compiler() {
    return spirv::kCompiler;
}

// What the driver's compiler reports of a pipeline created with its statistics captured, as
// "name value, ..." (registers, shared memory, ... as the driver names them).
std::string Pipelines::statistics(VkPipeline pipeline) const {
    const auto properties = dev_.executable_properties();
    const auto stats = dev_.executable_statistics();
    if (!properties || !stats) return "no statistics";
    auto pi = make<VkPipelineInfoKHR>(VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR);
    pi.pipeline = pipeline;
    uint32_t n = 0;
    if (properties(dev_.handle(), &pi, &n, nullptr) != VK_SUCCESS || n == 0) return "no statistics";
    auto ei = make<VkPipelineExecutableInfoKHR>(VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR);
    ei.pipeline = pipeline;
    ei.executableIndex = 0;
    uint32_t m = 0;
    stats(dev_.handle(), &ei, &m, nullptr);
    std::vector<VkPipelineExecutableStatisticKHR> st(
        m, make<VkPipelineExecutableStatisticKHR>(
               VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR));
    if (stats(dev_.handle(), &ei, &m, st.data()) != VK_SUCCESS) return "no statistics";
    std::string out;
    for (const auto& s : st) {
        if (!out.empty()) out += ", ";
        out += s.name;
        out += ' ';
        switch (s.format) {
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
                out += s.value.b32 ? "yes" : "no";
                break;
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
                out += std::to_string(s.value.i64);
                break;
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
                out += std::to_string(s.value.u64);
                break;
            default:
                out += fmt::format("{}", s.value.f64);
        }
    }
    return out;
}

Pipelines::~Pipelines() {
    VkDevice d = dev_.handle();
    for (auto& [key, k] : cache_) {
        vkDestroyPipeline(d, k->pipeline, nullptr);
        vkDestroyPipelineLayout(d, k->layout, nullptr);
        vkDestroyDescriptorSetLayout(d, k->set_layout, nullptr);
    }
}

const Kernel& Pipelines::get(const std::string& name, uint32_t n_bindings, uint32_t push_bytes,
                             std::vector<uint32_t> spec) {
    auto key = std::make_pair(name, spec);
    if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
    std::span<const uint32_t> words = find_module(name);
    if (words.empty()) fail("this build carries no shader module '{}'", name);
    VkDevice d = dev_.handle();
    auto k = std::make_unique<Kernel>();
    k->name = name;
    k->spec = spec;
    k->n_bindings = n_bindings;
    k->push_bytes = push_bytes;

    std::vector<VkDescriptorSetLayoutBinding> bs(n_bindings);
    for (uint32_t i = 0; i < n_bindings; ++i)
        bs[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    auto li =
        make<VkDescriptorSetLayoutCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
    li.bindingCount = n_bindings;
    li.pBindings = bs.data();
    if (vkCreateDescriptorSetLayout(d, &li, nullptr, &k->set_layout) != VK_SUCCESS)
        fail("cannot create the descriptor layout of kernel {}", name);
    VkPushConstantRange pr{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
    auto pli = make<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
    pli.setLayoutCount = 1;
    pli.pSetLayouts = &k->set_layout;
    pli.pushConstantRangeCount = push_bytes ? 1 : 0;
    pli.pPushConstantRanges = &pr;
    if (vkCreatePipelineLayout(d, &pli, nullptr, &k->layout) != VK_SUCCESS)
        fail("cannot create the pipeline layout of kernel {}", name);

    auto mi = make<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
    mi.codeSize = words.size() * 4;
    mi.pCode = words.data();
    VkShaderModule mod = VK_NULL_HANDLE;
    if (vkCreateShaderModule(d, &mi, nullptr, &mod) != VK_SUCCESS)
        fail("the driver rejects shader module {}", name);
    std::vector<VkSpecializationMapEntry> entries(spec.size());
    for (uint32_t i = 0; i < spec.size(); ++i) entries[i] = {i, i * 4u, 4};
    VkSpecializationInfo si{(uint32_t)spec.size(), entries.data(), spec.size() * 4, spec.data()};
    auto ci = make<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
    ci.stage =
        make<VkPipelineShaderStageCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO);
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = mod;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = spec.empty() ? nullptr : &si;
    ci.layout = k->layout;
    if (dev_.kernel_stats()) ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
    auto robustness = make<VkPipelineRobustnessCreateInfoEXT>(
        VK_STRUCTURE_TYPE_PIPELINE_ROBUSTNESS_CREATE_INFO_EXT);
    if (dev_.unchecked_buffers()) {
        robustness.storageBuffers = VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DISABLED_EXT;
        robustness.uniformBuffers = VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DISABLED_EXT;
        robustness.vertexInputs = VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DEVICE_DEFAULT_EXT;
        robustness.images = VK_PIPELINE_ROBUSTNESS_IMAGE_BEHAVIOR_DEVICE_DEFAULT_EXT;
        ci.pNext = &robustness;
    }
    // The driver compiles a pipeline on first use: logged, since a compile inside a step of a
    // server lengthens that step for every stream it carries.
    const auto t0 = std::chrono::steady_clock::now();
    VkResult r = vkCreateComputePipelines(d, dev_.pipeline_cache(), 1, &ci, nullptr, &k->pipeline);
    vkDestroyShaderModule(d, mod, nullptr);
    if (r != VK_SUCCESS) fail("cannot create the pipeline of kernel {} ({})", name, result_name(r));
    log::debug(
        "vulkan: pipeline {} {} created in {:.1f} ms", name, spec,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (dev_.kernel_stats()) {
        k->statistics = statistics(k->pipeline);
        log::info("kernel {} {}: {}", name, spec, k->statistics);
    }
    const Kernel& out = *k;
    cache_.emplace(std::move(key), std::move(k));
    return out;
}

std::pair<uint32_t, uint32_t> grid(const Features& f, uint64_t n) {
    uint64_t maxx = f.max_workgroup_count[0] ? f.max_workgroup_count[0] : 65535;
    if (n <= maxx) return {(uint32_t)std::max<uint64_t>(n, 1), 1};
    uint64_t y = (n + maxx - 1) / maxx;
    uint64_t x = (n + y - 1) / y;
    return {(uint32_t)x, (uint32_t)y};
}

CommandList::CommandList(Device& dev) : dev_(dev), tracing_(env::get_bool("DELTALLM_VK_TRACE")) {
    cb_ = dev_.allocate_command_buffer();
    parts_.push_back(cb_);
}

CommandList::~CommandList() {
    if (parts_running_) {  // recording failed after parts were queued: they may still run
        try {
            dev_.wait_idle();
        } catch (...) {
        }
    }
    release();
    if (queries_) vkDestroyQueryPool(dev_.handle(), queries_, nullptr);
    for (VkCommandBuffer p : parts_) dev_.free_command_buffer(p);
}

void CommandList::release() {
    for (VkDescriptorPool p : pools_) vkDestroyDescriptorPool(dev_.handle(), p, nullptr);
    pools_.clear();
    sets_left_ = 0;
    descriptors_left_ = 0;
}

void CommandList::begin(bool reusable) {
    if (parts_running_) dev_.wait_idle();
    parts_running_ = false;
    for (size_t i = 1; i < parts_.size(); ++i) dev_.free_command_buffer(parts_[i]);
    parts_.resize(1);
    cb_ = parts_[0];
    reusable_ = reusable;
    after_barrier_ = false;
    vkResetCommandBuffer(cb_, 0);
    release();
    n_dispatches_ = 0;
    n_barriers_ = 0;
    labels_.clear();
    trace_.clear();
    traced_dispatches_.clear();
    begin_part();
    if (queries_) {
        vkCmdResetQueryPool(cb_, queries_, 0, max_marks_ + 1);
        vkCmdWriteTimestamp(cb_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, 0);
    }
}

void CommandList::begin_part() {
    auto bi = make<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    bi.flags = reusable_ ? 0 : VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vkBeginCommandBuffer(cb_, &bi);
}

void CommandList::submit_early() {
    DL_ASSERT(after_barrier_);
    if (vkEndCommandBuffer(cb_) != VK_SUCCESS) fail("recording a Vulkan command buffer failed");
    dev_.submit(cb_);
    parts_running_ = true;
    cb_ = dev_.allocate_command_buffer();
    parts_.push_back(cb_);
    begin_part();
}

void CommandList::submit_and_wait() {
    if (parts_running_) {  // every part but the last is running already
        parts_running_ = false;
        dev_.submit_and_wait(cb_);
        return;
    }
    dev_.submit_and_wait(parts_.data(), (uint32_t)parts_.size());
}

void CommandList::end() {
    if (tracing_ && !traced_dispatches_.empty()) trace_stage("(after the last mark)");
    if (queries_ && !each_stage_) {
        labels_ = {kWhole};
        vkCmdWriteTimestamp(cb_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, 1);
    }
    if (vkEndCommandBuffer(cb_) != VK_SUCCESS) fail("recording a Vulkan command buffer failed");
}

VkDescriptorSet CommandList::allocate_set(const Kernel& k) {
    if (sets_left_ == 0 || descriptors_left_ < k.n_bindings) {
        constexpr uint32_t kSets = 256;
        VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSets * 8};
        auto pi = make<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
        pi.maxSets = kSets;
        pi.poolSizeCount = 1;
        pi.pPoolSizes = &size;
        VkDescriptorPool pool;
        if (vkCreateDescriptorPool(dev_.handle(), &pi, nullptr, &pool) != VK_SUCCESS)
            fail("cannot create a Vulkan descriptor pool");
        pools_.push_back(pool);
        sets_left_ = kSets;
        descriptors_left_ = kSets * 8;
    }
    auto ai = make<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
    ai.descriptorPool = pools_.back();
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &k.set_layout;
    VkDescriptorSet set;
    if (vkAllocateDescriptorSets(dev_.handle(), &ai, &set) != VK_SUCCESS)
        fail("cannot allocate a descriptor set");
    --sets_left_;
    descriptors_left_ -= k.n_bindings;
    return set;
}

void CommandList::dispatch(const Kernel& k, std::initializer_list<View> bindings, const void* push,
                           uint32_t gx, uint32_t gy, uint32_t gz) {
    DL_ASSERT(bindings.size() == k.n_bindings);
    VkDescriptorSet set = allocate_set(k);
    std::vector<VkDescriptorBufferInfo> infos;
    infos.reserve(k.n_bindings);
    for (const View& v : bindings) {
        DL_ASSERT(v.buffer != VK_NULL_HANDLE && v.range > 0);
        DL_ASSERT(v.offset % std::max<uint32_t>(dev_.features().min_storage_offset_alignment, 1) ==
                  0);
        infos.push_back({v.buffer, v.offset, v.range});
    }
    std::vector<VkWriteDescriptorSet> ws(k.n_bindings);
    for (uint32_t i = 0; i < k.n_bindings; ++i) {
        ws[i] = make<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
        ws[i].dstSet = set;
        ws[i].dstBinding = i;
        ws[i].descriptorCount = 1;
        ws[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        ws[i].pBufferInfo = &infos[i];
    }
    vkUpdateDescriptorSets(dev_.handle(), k.n_bindings, ws.data(), 0, nullptr);
    vkCmdBindPipeline(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline);
    vkCmdBindDescriptorSets(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout, 0, 1, &set, 0, nullptr);
    if (k.push_bytes)
        vkCmdPushConstants(cb_, k.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, k.push_bytes, push);
    vkCmdDispatch(cb_, gx, gy, gz);
    ++n_dispatches_;
    after_barrier_ = false;
    if (tracing_) {
        std::string line =
            fmt::format("{}[{}] {}x{}x{} push", k.name, fmt::join(k.spec, ","), gx, gy, gz);
        for (uint32_t i = 0; i + 4 <= k.push_bytes; i += 4) {
            uint32_t word;
            std::memcpy(&word, static_cast<const char*>(push) + i, 4);
            line += fmt::format(" {:x}", word);
        }
        line += " views";
        for (const View& v : bindings)
            line += fmt::format(" b{}+{}:{}", dev_.buffer_number(v.buffer), v.offset, v.range);
        traced_dispatches_.push_back(std::move(line));
    }
}

void CommandList::barrier() {
    auto mb = make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    vkCmdPipelineBarrier(cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    ++n_barriers_;
    after_barrier_ = true;
}

void CommandList::transfer_barrier() {
    auto mb = make<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                       VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    const VkPipelineStageFlags stages =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(cb_, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
    ++n_barriers_;
    after_barrier_ = true;
}

void CommandList::host_barrier() {
    record_host_barrier(cb_);
    ++n_barriers_;
}

void CommandList::copy(const Buffer& src, uint64_t src_off, const Buffer& dst, uint64_t dst_off,
                       uint64_t n) {
    VkBufferCopy c{src_off, dst_off, n};
    vkCmdCopyBuffer(cb_, src.handle(), dst.handle(), 1, &c);
    after_barrier_ = false;
}

void CommandList::enable_timestamps(uint32_t max_marks, bool each_stage) {
    if (!dev_.features().timestamps || queries_) return;
    each_stage_ = each_stage;
    if (!each_stage) max_marks = 1;
    auto qi = make<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = max_marks + 1;
    if (vkCreateQueryPool(dev_.handle(), &qi, nullptr, &queries_) == VK_SUCCESS)
        max_marks_ = max_marks;
}

void CommandList::trace_stage(const std::string& label) {
    trace_.push_back(fmt::format("{}: {}", label, fmt::join(traced_dispatches_, "; ")));
    traced_dispatches_.clear();
    fmt::print(stderr, "vk trace: {}\n", trace_.back());
}

void CommandList::mark(const std::string& label) {
    if (tracing_) trace_stage(label);
    if (!queries_ || !each_stage_ || labels_.size() >= max_marks_) return;
    labels_.push_back(label);
    vkCmdWriteTimestamp(cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, queries_,
                        (uint32_t)labels_.size());
}

std::vector<std::pair<std::string, double>> CommandList::times() {
    std::vector<std::pair<std::string, double>> out;
    if (!queries_ || labels_.empty()) return out;
    std::vector<uint64_t> ts(labels_.size() + 1);
    if (vkGetQueryPoolResults(dev_.handle(), queries_, 0, (uint32_t)ts.size(), ts.size() * 8,
                              ts.data(), 8,
                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS)
        return out;
    double ns = dev_.features().timestamp_period_ns;
    for (size_t i = 0; i < labels_.size(); ++i)
        out.push_back({labels_[i], (ts[i + 1] - ts[i]) * ns * 1e-6});
    return out;
}

}  // namespace dl::vk
