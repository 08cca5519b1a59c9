// Compute pipelines built from the embedded SPIR-V modules, and the command lists that record
// dispatches of them. A kernel is identified by its module name ("gemv_q4_k",
// "matmul_f16@khr_coopmat") and its specialization constants (workgroup size, rows per group);
// pipelines are created once per device and cached. A CommandList owns the descriptor sets it
// allocates, so a recorded command (the decode token command) can be replayed as long as it lives.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "vulkan/device.h"

namespace dl::vk {

// The embedded SPIR-V words of a module, or an empty span when the binary lacks it.
std::span<const uint32_t> find_module(const std::string& name);
// The compiler that built the modules ("shaderc v2025.2 ...").
const char* shader_compiler();

struct Kernel {
    VkPipeline pipeline = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    uint32_t n_bindings = 0;
    uint32_t push_bytes = 0;
    std::string name;
    std::vector<uint32_t> spec;  // its specialization constants, in order
    // What the driver's compiler reports of the pipeline ("Register Count 64, ..."), when the
    // device captures statistics (Device::kernel_stats); empty otherwise.
    std::string statistics;
};

// Creates and owns the pipelines of one device.
class Pipelines {
  public:
    explicit Pipelines(Device& dev) : dev_(dev) {}
    ~Pipelines();
    Pipelines(const Pipelines&) = delete;
    Pipelines& operator=(const Pipelines&) = delete;

    // The pipeline of module `name` with n_bindings storage buffers, push constants of push_bytes
    // and specialization constants spec[i] at constant_id i. Throws dl::Error when the module is
    // missing or the driver rejects it.
    const Kernel& get(const std::string& name, uint32_t n_bindings, uint32_t push_bytes,
                      std::vector<uint32_t> spec = {});
    Device& device() { return dev_; }
    size_t size() const { return cache_.size(); }  // pipelines created so far

  private:
    std::string statistics(VkPipeline pipeline) const;

    Device& dev_;
    std::map<std::pair<std::string, std::vector<uint32_t>>, std::unique_ptr<Kernel>> cache_;
};

// Workgroup counts (x, y) covering n groups within the device's per-dimension limit; shaders
// compute their linear group id as y * gl_NumWorkGroups.x + x and skip ids past n.
std::pair<uint32_t, uint32_t> grid(const Features& f, uint64_t n);

class CommandList {
  public:
    explicit CommandList(Device& dev);
    ~CommandList();
    CommandList(const CommandList&) = delete;
    CommandList& operator=(const CommandList&) = delete;

    // Starts recording (dropping what was recorded before). reusable: the command will be
    // submitted many times (the token command); otherwise once.
    void begin(bool reusable = false);
    void end();
    // One dispatch: bindings in order, push constants (push_bytes of the kernel), group counts.
    void dispatch(const Kernel& k, std::initializer_list<View> bindings, const void* push,
                  uint32_t gx, uint32_t gy = 1, uint32_t gz = 1);
    template <typename P>
    void dispatch(const Kernel& k, std::initializer_list<View> bindings, const P& push, uint32_t gx,
                  uint32_t gy = 1, uint32_t gz = 1) {
        DL_ASSERT(sizeof(P) == k.push_bytes);
        dispatch(k, bindings, static_cast<const void*>(&push), gx, gy, gz);
    }
    // Makes every earlier shader write visible to every later shader read (and transfers).
    // Everything recorded before completes (and its shader writes are visible) before the
    // dispatches recorded after start. Compute on both sides: a stage of the token command
    // waits for nothing more than the dispatches before it.
    void barrier();
    // The same with transfers (copy()) on either side.
    void transfer_barrier();
    // record_host_barrier: the last command of a list whose results the host reads from mapped
    // memory.
    void host_barrier();
    void copy(const Buffer& src, uint64_t src_off, const Buffer& dst, uint64_t dst_off, uint64_t n);
    // Timestamps for --profile: mark(label) after a stretch of work (a no-op unless enabled);
    // times() after a submit gives the milliseconds of each stretch since the previous mark (or
    // begin). each_stage false: no mark writes one; times() gives the whole command as one
    // stretch, kWhole. On an H200 a timestamp after every stage of a 9B's token lengthened it by
    // a tenth (docs/perf/history.md, 2026-12-03 night), so the profile times some tokens whole.
    void enable_timestamps(uint32_t max_marks, bool each_stage = true);
    static constexpr const char* kWhole = "(whole)";
    void mark(const std::string& label);
    std::vector<std::pair<std::string, double>> times();

    // Runs the command and waits for it: each of its parts in order, or, right after a
    // recording that queued parts with submit_early, the parts not yet queued.
    void submit_and_wait();
    // Ends the part recorded so far and queues it at once, so the device starts on it while the
    // rest is recorded (a prefill window's command is recorded on first use, in the window's
    // time); recording goes on in a new part. Only right after barrier() or
    // transfer_barrier(): the next part's work then waits for this part's, and the wait at the
    // end covers both. The host's inputs of the command must be in place before the call.
    void submit_early();
    uint32_t n_parts() const { return (uint32_t)parts_.size(); }
    uint32_t n_dispatches() const { return n_dispatches_; }
    uint32_t n_barriers() const { return n_barriers_; }  // recorded since begin()
    // The trace of what is recorded (DELTALLM_VK_TRACE, or set_tracing): at each mark, and at
    // end() for what follows the last, one line: the mark's label, then each dispatch since the
    // mark before as kernel[specialization constants], its workgroup counts, its push-constant
    // words (hex) and its bound views (bBUFFER+OFFSET:RANGE, the buffer numbered in the order the
    // device created it), so that two recordings can be compared word for word. Each line is also
    // written to stderr; trace() holds those since begin().
    void set_tracing(bool on) { tracing_ = on; }
    const std::vector<std::string>& trace() const { return trace_; }

  private:
    VkDescriptorSet allocate_set(const Kernel& k);
    void release();
    void trace_stage(const std::string& label);
    void begin_part();  // begins cb_ as begin() asked (reusable or submitted once)

    Device& dev_;
    VkCommandBuffer cb_ = VK_NULL_HANDLE;  // the part being recorded, or the last: parts_.back()
    std::vector<VkCommandBuffer> parts_;   // every part, in order
    bool parts_running_ = false;           // queued by submit_early and not yet waited for
    bool reusable_ = false;
    bool after_barrier_ = false;
    std::vector<VkDescriptorPool> pools_;
    uint32_t sets_left_ = 0;
    uint32_t descriptors_left_ = 0;
    uint32_t n_dispatches_ = 0;
    uint32_t n_barriers_ = 0;
    VkQueryPool queries_ = VK_NULL_HANDLE;
    uint32_t max_marks_ = 0;
    bool each_stage_ = true;
    std::vector<std::string> labels_;
    bool tracing_;
    std::vector<std::string> trace_, traced_dispatches_;
};

}  // namespace dl::vk
