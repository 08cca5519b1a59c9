// The residency plan: before any upload, decides whether a model runs whole on a device and how
// its memory is laid out: weight matrices in their GGUF block formats packed into slabs no
// larger than the device's storage-buffer range, small per-channel parameters (norms, conv taps,
// gates) as F32 in one buffer, the KV cache, the DeltaNet state and conv ring, and scratch.
// Anything the device cannot serve is a Decline with a sentence and the numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/align.h"
#include "model/forward_pass.h"
#include "model/model.h"
#include "vulkan/act_layout.h"
#include "vulkan/decline.h"
#include "vulkan/device.h"

namespace dl::vk {

struct PlanOptions {
    int64_t n_ctx = 4096;  // the most tokens one sequence holds
    // Sequences expected at once (a server's slots): the paged KV cache's pool holds this many
    // of n_ctx tokens where the budget allows, and at least one; the recurrent state's pools hold
    // kSpareSessions more (sessions beside them: a solo run, a prefix cache's probe).
    int64_t sequences = 1;
    static constexpr int64_t kSpareSessions = 3;
    // Device memory the plan may use; 0: 90% of the largest device-local heap.
    uint64_t budget_bytes = 0;
    // A prefix cache will keep snapshots: of the budget left over, kCacheKvShare goes to more
    // KV blocks (the rows snapshots hold; all but the headroom where no layer is recurrent) and
    // kCacheStateShare to the snapshots' copies of the recurrent state (Plan::snapshot_bytes).
    // The rest is headroom: the driver's own allocations, the snapshots' rounded buffers. On a
    // discrete GPU only (an integrated GPU's or a CPU device's memory is the host's).
    bool prefix_cache = false;
    static constexpr double kCacheKvShare = 0.45, kCacheStateShare = 0.40;
    // When the requested context does not fit, plan the largest that does (else decline).
    bool shrink_context = true;
    // Rows of a prefill window (one command buffer per window; DELTALLM_VK_WINDOW). Longer
    // windows fill the GEMM tiles better and expand each matrix to F16 once for more rows: on an
    // H200, pp2048 in one window of 2048 against four of 512: Qwen3.5-9B +20 %, Qwen3-8B +15 %,
    // 0.8B +45 %. The plan halves it (not below kMinWindow) where memory is short, and keeps it
    // within the context.
    int64_t window = window_from_env();
    // A mixture's window whose (row, slot) pairs are at least this many an expert on average runs
    // the sorted expert tiles (NV cooperative matrix 2): it holds the pairs' inputs as F16 rows
    // (Plan::window_pairs16_bytes; 0: never).
    uint32_t sorted_expert_pairs = 0;
    // A mixture's window whose pairs are at least this many an expert on average holds the
    // largest layer's expert stacks expanded to F16 (the sorted tiles or the grouped tiles read
    // them: Plan::window_experts16_bytes; 0: never).
    uint32_t expert_stacks_f16_pairs = 0;
    static int64_t window_from_env();
    static constexpr int64_t kMinWindow = 512;
};

// The rows the device holds for a weight tensor: a matrix's, or every matrix's of a stack (a
// mixture's experts, [cols, rows, n_expert], one after another).
int64_t device_rows(const Tensor& t);

// Alignment of every buffer part a kernel binds: at least every minStorageBufferOffsetAlignment
// seen.
constexpr uint64_t kBindAlign = 256;

// One session's DeltaNet state S and conv ring of one GDN layer, as the recurrent state's pools
// hold them (a slot each, aligned for a binding).
inline uint64_t deltanet_state_bytes(const Hparams& hp) {
    const uint64_t d_v = (uint64_t)(hp.ssm_d_inner / hp.ssm_n_v_heads);
    return align_up((uint64_t)hp.ssm_n_v_heads * hp.ssm_d_state * d_v * 4, kBindAlign);
}
inline uint64_t conv_ring_bytes(const Hparams& hp) {
    return align_up((uint64_t)hp.ssm_conv_kernel * hp.conv_dim() * 4, kBindAlign);
}

// Where one weight matrix lives: slab index and byte offset (aligned for a storage binding).
struct Placement {
    const Tensor* tensor = nullptr;
    uint32_t slab = 0;
    uint64_t offset = 0;
    uint64_t bytes = 0;
};

struct Plan {
    Variant variant = Variant::scalar;
    int64_t n_ctx = 0;
    // Prefill window rows; 0 when prefill must replay the token command (window_decline says why).
    int64_t window = 0;
    std::string window_decline;
    // The window attention runs on tensor cores (Kernels::attention_cm2) rather than on tiles.
    bool window_attention_tensor_cores = false;
    // F16 copy of the widest GEMM input of a window, or its rows rounded to bytes for the batched
    // GEMV (0: neither)
    uint64_t window_x16_bytes = 0;
    // Two slots, each the F16 expansion of the largest group of quantized layer matrices that
    // one stage multiplies by (gemm_groups), for the NV cooperative matrix 2 tiles of a window
    // (Kernels::gemm; 0: none): the next group's matrices are expanded into one while the GEMMs
    // over the other run. The resident weights stay in their blocks.
    uint64_t window_w16_bytes = 0;
    // The scratch of the window's GEMMs of few rows that split their columns over workgroups
    // (Kernels::gemm_split_scratch): enough for the most GEMMs one stage runs, its first
    // window_split_counters bytes their counters.
    uint64_t window_split_bytes = 0, window_split_counters = 0;
    // A mixture's window on the NV cooperative matrix 2 tiles: the inputs of its (row, slot)
    // pairs in the experts' order as F16 rows (Kernels::moe_gather, then the SwiGLU's copy), and
    // a tile's rows more (Kernels::gemm_experts_sorted; 0: none).
    uint64_t window_pairs16_bytes = 0;
    // The largest layer's gate and up stacks (or its down stack, whichever is more) expanded to
    // F16 for a window (PlanOptions::expert_stacks_f16; 0: none).
    uint64_t window_experts16_bytes = 0;
    std::vector<uint64_t> slabs;      // sizes of the weight slabs
    std::vector<Placement> matrices;  // every matrix the trunk and the head read
    uint64_t weight_bytes = 0;        // sum of the slabs
    uint64_t param_bytes = 0;         // F32 per-channel parameters
    // The paged KV cache's pool (Kernels::kKvBlock): its blocks, and their F16 K and V rows of
    // all attention layers.
    uint64_t kv_blocks = 0;
    uint64_t kv_bytes = 0;
    // The recurrent state's pools: a slot for each session open at once, each the DeltaNet state S
    // and conv ring of all GDN layers (0 slots for a model without them).
    uint64_t state_slots = 0;
    uint64_t state_slot_bytes = 0;
    uint64_t recurrent_bytes = 0;  // all slots
    // What each session allocates for itself (attention partials, activations, logits): counted
    // once in the total, and once for each further sequence the pool holds.
    uint64_t per_sequence_bytes = 0;
    uint64_t scratch_bytes = 0;  // activations (token and window), logits, attention partials
    uint64_t budget_bytes = 0;
    // Device memory a prefix cache's snapshots may take for their own copies (of the recurrent
    // state; their KV rows stay in the pool's blocks); 0 unless PlanOptions::prefix_cache.
    uint64_t snapshot_bytes = 0;
    uint64_t total() const {
        return weight_bytes + param_bytes + kv_bytes + recurrent_bytes + scratch_bytes;
    }
    // Sequences of n_ctx tokens the pool holds at once, each with its blocks for all its tokens.
    int64_t pool_sequences() const;
    const Placement* find(const Tensor* t) const;
    // "weights 5.3 GiB in 3 slabs, KV cache 1.0 GiB (a pool of 4096 tokens), ..." for logs and
    // `deltallm info`.
    std::string describe() const;
};

// Plans the model on a device with these features; declines with a sentence otherwise.
Result<Plan> plan(const Model& model, const Features& features, Variant variant,
                  const PlanOptions& opts);

}  // namespace dl::vk
