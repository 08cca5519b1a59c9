// A prefill window's command as a plan: every item it records, in order, with its arguments
// resolved: the GEMM tiles with their F16 expansions (one group ahead), the row kernels of the
// norms, attention and DeltaNet, and the barriers and stage marks between them. The driver plans
// a window from the model's forward pass (chain.h) and the device's kernels
// (ResidentDriver::plan_window), then records the plan mechanically, queueing it in parts as it
// goes where the window's inputs are in place (window_command).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"
#include "vulkan/kernels.h"

namespace dl::vk {

struct WindowItem {
    enum class Kind : uint8_t {
        expand,         // w16 = the matrix t as F16, for the GEMM tiles that read it
        gemm,           // y (act or every row's logits) (+)= t · act[x_off] over the window's rows
        embed,          // h = the rows of tok_embd of the window's ids
        rms_norm,       // act[y_off] = RMSNorm(act[x_off]) · t, every row
        f16_copy,       // the F16 copy of act[x_off] (n values) the next GEMM tiles read
        round_rows,     // `rows` rows at act[x_off] (n values each; 0: the window's rows)
                        // rounded to bytes for the next GEMMs (the batched GEMV over bytes), into
                        // the F16 copy's buffer (y_off kNone) or act[y_off]; u_off not kNone:
                        // the rows rounded are SiLU(act[x_off]) · act[u_off]
        deltanet_rows,  // the layer's DeltaNet over the rows (conv, gates, scan, gated norm)
        attention_rows,  // the layer's attention over the rows
        swiglu,          // act[y_off] = SiLU(act[x_off]) · act[u_off], n values
        // A mixture of experts over the rows (Kernels::moe_route, moe_sort, gemv_experts,
        // moe_sum, shared_expert_add; `experts` holds the GEMV's operands but the views).
        moe_route,            // the choice at act[y_off] from the router's logits at act[x_off]
        moe_sort,             // the choice's pairs grouped by expert at act[y_off] (and, u_off
                              // not kNone, the table of the expert GEMM tiles at act[u_off]; and
                              // inv_off not kNone, each pair's position at act[inv_off])
        moe_gather,           // the pairs' rows of act[x_off] (n values each) in the order at
                              // act[u_off], as F16 into the pairs' buffer
        gemv_experts,         // a GEMV over the chosen experts' rows of t
        gemm_experts,         // the same as grouped GEMM tiles, their table at act[u_off]
        gemm_experts_sorted,  // the same over the pairs' buffer, written in the experts' order
        moe_sum,              // act[y_off] += the weighted sum of each row's pairs at act[x_off]
        shared_expert_add,    // act[y_off] += sigmoid(t · act[x_off]) · act[u_off], every row,
                              // then act[x_off] = RMSNorm(act[y_off]) · next_norm
        head_gemv,            // the last row's logits: one GEMV into the session's logits
        // A batch of decodes (rows of different sequences, ResidentDriver::step): the layer's
        // mixer by the decode kernels on each row's sequence's cache or state, every row in one
        // dispatch.
        deltanet_batch,
        attention_batch,
        sample_batch,    // each of n rows' next token, chosen from its logits into its words
        logits_to_host,  // every row's logits copied to the host (n rows)
        copy_row,        // act[y_off ..] = act[x_off ..], n values (a chunk's last row beside a
                         // batch's rows, for the head)
        barrier,         // a barrier with no stage after it
        stage_end,       // a barrier ending the stage `role` (counted for queueing in parts)
        mark_end,        // a barrier ending the stage `role`, not counted
        host_end,        // the barrier to the host, ending the stage `role`
    };
    Kind kind = Kind::barrier;
    const Tensor* t = nullptr;  // the matrix, or the norm weights of rms_norm
    int64_t layer = -1;
    uint32_t x_off = 0, y_off = 0, n = 0;
    // swiglu, round_rows (kNone: none), shared_expert_add: the second input; moe_sort,
    // gemm_experts: the table of the expert tiles
    uint32_t u_off = 0;
    // round_rows, gemm, deltanet_rows, attention_rows: the rows (0: the window's); the last two
    // from row first_row of the window, on the session of chunk `segment` (a step's prompt
    // chunks after its decode rows). moe_sort: the pairs a tile of its table holds (0:
    // Kernels::kExpertTileRows; the sorted expert tiles' kSortedTilePairs).
    uint32_t rows = 0, first_row = 0, segment = 0;
    const Tensor* next_norm = nullptr;  // shared_expert_add: the norm it then writes to xn
    // shared_expert_add: the experts' slots' outputs whose weighted sum it adds first (moe_sum's
    // work, in its order; kNone: moe_sum runs apart).
    uint32_t sum_off = Kernels::kNone;
    // moe_sort: where each pair's position goes; moe_sum, shared_expert_add: where each slot's
    // output lies in the experts' order (kNone: the rows' order).
    uint32_t inv_off = Kernels::kNone;
    bool to_logits = false;  // gemm: into the window's logits rather than act
    // rms_norm, swiglu: also writes its rows' F16 copy, which the next GEMMs read (no f16_copy);
    // into the pairs' buffer (swiglu: the sorted expert tiles read it) with to_pairs16
    bool f16_out = false, to_pairs16 = false;
    bool accumulate = false;
    View w16{};               // expand, gemm, gemm_experts: the F16 expansion (range 0: none)
    bool expanded = false;    // gemm: reads w16
    uint32_t stage_rows = 0;  // gemm: the weight rows of its group's GEMMs
    // gemm, attention_rows: the scratch of a split over K or over the keys (none: unsplit)
    Kernels::SplitScratch split{};
    Kernels::AttentionRows attention{};
    Kernels::DeltaNetStep deltanet{};  // deltanet_batch
    Kernels::ExpertGemv experts{};     // gemv_experts, gemm_experts
    std::string role;
};

struct WindowPlan {
    std::vector<WindowItem> items;
    bool batch = false;  // rows of a step's sequences: the head writes the batch's logits
    // One line an item, for tests and traces.
    std::string describe() const;
};

}  // namespace dl::vk
