// The decode token command as a plan: every dispatch it records, stage by stage, with its
// arguments resolved and its buffers named by role rather than bound. The driver plans a
// session's token command from the model's forward pass (chain.h), the device's kernels and the
// Fusions in force (ResidentDriver::plan_token), then records the plan mechanically
// (record_token). Plans are plain values: tests compare them (describe()) to see what a rule of
// Fusions changes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/model.h"
#include "vulkan/kernels.h"

namespace dl::vk {

// The rows a GEMV reads: one matrix, or a run of matrices back to back in one slab.
struct PlannedMatrix {
    const Tensor* first = nullptr;  // the run's first tensor
    QType type = QType::F32;
    uint32_t slab = 0;
    uint64_t offset = 0, bytes = 0;
    uint32_t rows = 0, cols = 0;
};

// The int8 (Q8) forms of activations a GEMV reads or writes (Kernels::GemvRounding).
struct PlannedQ8 {
    bool x_q8 = false;                  // x_off holds the int8 form another kernel wrote
    uint32_t out_off = Kernels::kNone;  // this GEMV also writes its rows as int8 there
    const Tensor* out_norm = nullptr;   // ... times this norm's weights (the residual's form)
};

// Where a dispatch writes: the session's activations, or the head's logits.
enum class TokenOutput : uint8_t { act, host_logits, device_logits };

struct TokenDispatch {
    enum class Kind : uint8_t {
        embed,              // h = the token's row of the embedding
        rms_norm,           // act[y_off] = RMSNorm(act[x_off]) · norm
        gemv,               // y[y_off] (+)= W · act[x_off]
        gemv_normed,        // ... over the RMSNorm of x by `norm`, applied as x is quantized
        gemv_fused,         // ... += W · x, then xn = RMSNorm(h) · norm as its epilogue
        gemv_gated,         // ... over the DeltaNet output with its gated RMSNorm (`gated`)
        gemv_swiglu,        // act[y_off] = SiLU(G · x) · (U · x), G and U in one slab
        swiglu,             // act[y_off] = SiLU(act[g_off]) · act[u_off], n values
        moe_route,          // the router's choice at act[y_off] from its logits at act[x_off]
        moe_router,         // the router's logits m · act[x_off] at act[u_off], then its choice
                            // at act[y_off] (one dispatch)
        gemv_experts,       // a GEMV over the chosen experts' rows of m (`experts`)
        shared_expert_add,  // act[y_off] += sigmoid(norm · act[x_off]) · act[u_off], n values;
                            // then act[x_off] = RMSNorm(act[y_off]) · next_norm
        deltanet_step,      // the layer's DeltaNet decode step (`deltanet`)
        attention,          // the layer's decode attention (`attention`)
        sample,             // the next token chosen from the device logits
    };
    Kind kind = Kind::gemv;
    int64_t layer = -1;  // the mixers' layer (its KV cache, ring and state)
    PlannedMatrix m;     // the GEMVs' weights (gemv_swiglu: the span holding G and U)
    uint32_t x_off = 0, y_off = 0;
    TokenOutput y = TokenOutput::act;
    bool accumulate = false;
    float share = 1.f;                  // the GEMV's part of its stage's weight bytes (GemvPart)
    const Tensor* norm = nullptr;       // the norm weights rms_norm, gemv_normed, gemv_swiglu and
                                        // gemv_fused apply (shared_expert_add, moe_router: the
                                        // shared expert's gate weights)
    const Tensor* next_norm = nullptr;  // shared_expert_add: the norm it writes to xn after
    std::optional<PlannedQ8> q8;        // the int8 forms, where any
    uint64_t g_off = 0, u_off = 0;      // gemv_swiglu: G's and U's byte offsets in m; swiglu,
                                        // shared_expert_add: their inputs' offsets in act;
                                        // moe_router: its logits' offset in act
    uint32_t n = 0;                     // swiglu, shared_expert_add: values
    // gemv_experts: the operands but the views (the weights are m, x and y the activations).
    Kernels::ExpertGemv experts{};
    Kernels::GemvGatedIn gated{};
    Kernels::DeltaNetStep deltanet{};
    Kernels::Attention attention{};
    // attention: the short-context form's pipeline, created right after this one's.
    std::optional<Kernels::Attention> prepare_after;
};

struct TokenStage {
    std::string role;  // the profile's name for it
    std::vector<TokenDispatch> dispatches;
    bool to_host = false;  // ends with the barrier that makes its writes visible to the host
};

struct TokenPlan {
    std::vector<TokenStage> stages;
    // How many GEMVs each fusion gave its form (ResidentDriver::CommandCounts).
    uint32_t ffn_q8_reads = 0, gated_norm_reads = 0, deltanet_q8_reads = 0;
    uint32_t residual_q8_writes = 0, attention_q8_reads = 0, shared_output_pipeline = 0;

    size_t n_dispatches() const;
    // One line a stage, each dispatch with its kind, weights and arguments.
    std::string describe() const;
};

const char* kind_name(TokenDispatch::Kind k);

}  // namespace dl::vk
