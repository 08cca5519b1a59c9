// What the resident driver's files share (driver.cpp, session.cpp, token_command.cpp,
// window_command.cpp; not part of the driver's interface): the weights on the device and a
// session's buffers and recorded commands.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/error.h"
#include "vulkan/driver.h"
#include "vulkan/free_list.h"
#include "vulkan/pipeline.h"

namespace dl::vk {

struct ResidentDriver::Weights {
    std::vector<Buffer> slabs;
    Buffer params;
    std::map<const Tensor*, uint32_t> param_off;  // float offset of each small tensor
    uint32_t freq_off = 0;
    std::unique_ptr<Pipelines> pipes;
    std::unique_ptr<Kernels> kernels;
    // Prefill window scratch, shared by the sessions (prefill runs one window at a time):
    // activations of plan.window rows, their token ids, every row's logits when asked, and the
    // F16 copy of a GEMM input for the cooperative-matrix tiles, the F16 expansions of the
    // matrices, and the scratch of GEMMs split over K.
    Buffer win_act, win_ids, win_logits, win_x16, win_w16, win_split;
    // The expert stacks of a layer expanded to F16 for a window's expert tiles
    // (Tuning::expert_expand): the gate and up stacks, later the down stack.
    Buffer win_experts16;
    // A mixture's window pairs' inputs in the experts' order, F16 (Plan::window_pairs16_bytes).
    Buffer win_pairs16;
    Buffer batch_logits;  // a batch's logits, every row, on the device (made on first use)
    // The paged KV cache: each attention layer's key and value pools (empty for GDN layers) and
    // their blocks (null for a model without attention layers).
    std::vector<Buffer> k_pool, v_pool;
    std::shared_ptr<FreeList> kv;
    // The recurrent state: each GDN layer's pools of DeltaNet states S and conv rings (empty for
    // attention layers), a slot of each for every session open at once, and the free slots (null
    // for a model without GDN layers). A slot's part of a pool starts at slot ·
    // deltanet_state_bytes or slot · conv_ring_bytes (plan.h).
    std::vector<Buffer> state_pool, ring_pool;
    std::shared_ptr<FreeList> state_slots;
    // A batch's rows (ResidentDriver::step): for each, the words a session's token command reads
    // from its tok buffer (position, token id, sampling, where its recurrent state starts, its
    // block table; copied from the row's session before each step) and the scratch of its decode
    // attention and sampling. They belong to the batch, not to its sessions, so which sessions a
    // batch holds is data: one command of m rows serves every composition. Grown to the widest
    // batch seen (ResidentDriver::grow_batch).
    struct BatchRows {
        uint32_t rows = 0;
        uint64_t tok_stride = 0, partials_stride = 0, counter_stride = 0, scratch_stride = 0;
        Buffer tok, partials, counter, scratch;
        uint32_t* words(uint32_t b) const {
            return static_cast<uint32_t*>(tok.mapped()) + b * tok_stride / 4;
        }
    } batch;
    // A session's state and conv ring of GDN layer il, and where they start in their pools (in
    // floats: a batch's rows find them there, Kernels::DeltaNetStep::state_in_tok).
    View state(const Session& s, int64_t il, const Hparams& hp) const;
    View ring(const Session& s, int64_t il, const Hparams& hp) const;

    // The bytes of slab `slab` from `offset` that hold `bytes` of matrix rows, with the 4 spare
    // bytes the plan keeps after every matrix, rounded to whole words.
    View rows(uint32_t slab, uint64_t offset, uint64_t bytes) const {
        return view(slabs[slab], offset, (bytes + 7) / 4 * 4);
    }
    View matrix(const Plan& p, const Tensor* t) const {
        const Placement* pl = p.find(t);
        DL_ASSERT(pl);
        return rows(pl->slab, pl->offset, pl->bytes);
    }
    uint32_t param(const Tensor* t) const {
        auto it = param_off.find(t);
        DL_ASSERT(it != param_off.end());
        return it->second;
    }
    // A layer's decode or window attention arguments with its own q/k norm weights, where it
    // has them.
    void set_qk_norms(Kernels::Attention& a, const Layer& L) const {
        a.q_norm_off = L.q_norm ? param(L.q_norm) : Kernels::kNone;
        a.k_norm_off = L.k_norm ? param(L.k_norm) : Kernels::kNone;
    }
};

struct ResidentDriver::Session : SessionState {
    ~Session() override {
        for (uint32_t b : kv_blocks) kv->give(b);
        if (state_slots) state_slots->give(state_slot);
    }
    // The session's blocks of the paged KV cache, in order; tok holds them as its block table
    // (Kernels::kKvTable).
    std::vector<uint32_t> kv_blocks;
    std::shared_ptr<FreeList> kv;
    // Its slot of the recurrent state's pools (Weights::state, ring), where the model has GDN
    // layers.
    uint32_t state_slot = 0;
    std::shared_ptr<FreeList> state_slots;
    // tok: the token command's words (position, token id, chosen id, sampling) and the block table
    // (Kernels::tok_bytes).
    Buffer act, logits, logits_dev, tok, partials;
    Buffer sample_scratch;  // each vocabulary chunk's candidates (Kernels::sample)
    // The words the token command's last-workgroup epilogues count their workgroups on (0
    // between dispatches): word 0 the norm epilogues' (Kernels::gemv_fused), word
    // kRouterCounter the router's choice (Kernels::moe_router), which may share a stage with a
    // GEMV that norms.
    Buffer gemv_counter;
    static constexpr uint32_t kRouterCounter = 1;
    // The scratch of the tiled GEMVs that split their rows over workgroups (Kernels::gemv_split).
    Buffer gemv_split;
    // One word a head that the DeltaNet decode step's column groups and the decode attention's
    // splits count on (0 between dispatches; they are stages apart).
    Buffer head_counter;
    // The token commands, by token_slot(): the one that returns only the chosen token and the
    // one that writes the logits to the host; under --profile the same timed whole (every other
    // token runs these, so the profile has the token's time without the stages' timestamps);
    // each in the attention's short-context form for positions below short_until and in its
    // own form from there (either missing where no position takes it).
    std::array<std::unique_ptr<CommandList>, 8> token_cmds;
    static size_t token_slot(bool short_attention, bool host_logits, bool timed_whole) {
        return (short_attention ? 4 : 0) + (host_logits ? 2 : 0) + (timed_whole ? 1 : 0);
    }
    int64_t short_until = 0;
    int64_t profiled_tokens = 0;
    // Prefill window commands, by (rows, all logits): recorded on first use, replayed after.
    std::map<std::pair<uint32_t, bool>, std::unique_ptr<CommandList>> window_cmds;
};

inline View ResidentDriver::Weights::state(const Session& s, int64_t il, const Hparams& hp) const {
    return view(state_pool[il], s.state_slot * deltanet_state_bytes(hp), deltanet_state_bytes(hp));
}
inline View ResidentDriver::Weights::ring(const Session& s, int64_t il, const Hparams& hp) const {
    return view(ring_pool[il], s.state_slot * conv_ring_bytes(hp), conv_ring_bytes(hp));
}

// The id sample.comp chose into tok[2]; it gives none (0xffffffff) when the logits hold a NaN.
inline int32_t sampled_token(const void* tok) {
    const uint32_t id = static_cast<const uint32_t*>(tok)[2];
    if (id == 0xffffffffu)
        fail("the logits hold NaN values (the model's weights or activations are broken)");
    return (int32_t)id;
}

// The decode attention's arguments of a layer for an activation layout (token or window) and
// sessions of n_ctx positions.
Kernels::Attention attention_args(const Hparams& hp, const ActLayout& A, uint32_t freq_off,
                                  uint32_t n_ctx);

// The expert GEMV's arguments but the views (Kernels::ExpertGemv) over rows [first_row,
// first_row + rows) of each expert of the stack t, for n_rows rows of the layout A: each slot
// over x_off (per_slot: its own input) into y_off, in the expert order of A.perm where there are
// several rows; or (sum) the slots' weighted sum added to y_off.
Kernels::ExpertGemv expert_args(const Hparams& hp, const ActLayout& A, const Tensor* t,
                                uint32_t rows, uint32_t first_row, uint32_t x_off, bool per_slot,
                                uint32_t y_off, bool sum, uint32_t n_rows);

}  // namespace dl::vk
