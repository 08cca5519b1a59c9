// What the chain's step files (forward_attention.cpp, forward_deltanet.cpp) share with its driver
// (chain.cpp): the f32 copies of the small parameters, the session (one sequence's state), the
// scratch rows of a pass, and the steps of the forward pass (model/forward_pass.h) that are more
// than a norm or a matrix product. A pass holds the rows of one or more sequences (segments):
// row-wise steps run on all rows at once, the steps that read a sequence's state per segment.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cpu/chain.h"
#include "cpu/deltanet.h"
#include "cpu/matmul.h"
#include "model/forward_pass.h"
#include "model/model.h"

namespace dl::cpu {

struct LayerParams {
    std::vector<float> attn_norm, ffn_norm, q_norm, k_norm;
    std::vector<float> conv1d, dt_bias, ssm_a, ssm_norm;  // Gated DeltaNet
    int64_t slot = 0;  // index among the layers of its kind (KV cache or DeltaNet state)
    // Mixture of experts: each expert's matrices as tensors of their own (views of the stacks),
    // and the shared expert's gate vector.
    std::vector<Tensor> gate_e, up_e, down_e;
    std::vector<float> shexp_gate;
};

struct ChainWeights {
    ForwardPass pass;  // the steps forward() walks
    std::vector<LayerParams> layers;
    std::vector<float> output_norm;
    std::vector<float> inv_freq;  // rotary pair frequencies
    int64_t n_attn_layers = 0, n_gdn_layers = 0;
    deltanet::Shape gdn{};
    // Widths of the scratch rows.
    int64_t q_width = 0, kv_width = 0;
    int64_t ffn_width = 0;  // the dense FFN's hidden width (the shared expert's in a MoE)
};

struct ChainSession : SessionState {
    const Chain* owner = nullptr;
    // Attention KV rows per attention layer: [kv_rows][n_kv * head_dim], f16 or f32. Rows are
    // allocated as the sequence grows (Chain::grow_kv), never more than n_ctx.
    std::vector<std::vector<uint16_t>> k16, v16;
    std::vector<std::vector<float>> k32, v32;
    int64_t kv_rows = 0;
    // Per DeltaNet layer: the last K-1 conv inputs [K-1][conv_dim] and S [H_v][d_k][d_v].
    std::vector<std::vector<float>> conv_state, ssm_state;
    std::vector<float> logits;  // the last decoded token's (Chain::decode)
};

// A run of one sequence's consecutive tokens among the rows of a pass: rows row0..row0+n-1 are
// that session's positions pos0..pos0+n-1.
struct Segment {
    ChainSession* s = nullptr;
    int64_t row0 = 0, n = 0, pos0 = 0;
};

// The scratch rows of a pass, [rows][width], shared by every sequence in it (the executor's, so
// a session holds only its state).
struct Workspace {
    int64_t rows = 0;
    std::vector<float> x, xn, out;          // residual stream, normed input, mixer/FFN output
    std::vector<float> q, k, v, o;          // attention (q holds [q | gate] per head on qwen35)
    std::vector<float> qkv, z, beta, g, y;  // DeltaNet (g holds alpha, then the decay)
    std::vector<float> gate, up;            // FFN
    std::vector<float> rope_cos, rope_sin;  // [rows][rope_dims / 2]
    std::vector<float> scores;              // [threads][longest context in the pass]
    std::vector<int64_t> pos;               // each row's position in its sequence
    std::vector<int32_t> segment;           // each row's segment
    std::vector<float> head_out;            // logits of the rows that asked, [rows][n_vocab]
    Activations act;
    // Mixture of experts: router logits and the shared expert's output [rows][n_expert / E];
    // each row's chosen experts and weights [rows][k]; one expert's rows gathered (xe), its gate
    // and up (ge, ue) and down (de) outputs, and their input conversions.
    std::vector<float> router, shared;
    std::vector<int32_t> expert_ids;
    std::vector<float> expert_weights;
    std::vector<float> xe, ge, ue, de;
    std::vector<int32_t> expert_rows;
    std::vector<float> expert_weights_row;
    Activations act_e;
};

// Everything a step needs for one pass over up to ws.rows rows of one or more sequences.
struct Pass {
    const Model& model;
    const ChainWeights& w;
    const ChainOptions& opt;
    Workspace& ws;
    ThreadPool& pool;
    int64_t T;                      // rows in this pass
    std::span<const Segment> segs;  // in row order
};

// The steps of model/forward_pass.h that are more than a norm or a matrix product, each on the
// window's rows. Attention (forward_attention.cpp):
void qk_norm(Pass& p, const LayerParams& lp);
void rope(Pass& p);
void attention(Pass& p, const LayerParams& lp);  // k, v into each KV cache, then ws.o
void output_gate(Pass& p);
// Gated DeltaNet (forward_deltanet.cpp):
void deltanet_gates(Pass& p, const LayerParams& lp);
void deltanet_conv(Pass& p, const LayerParams& lp);
void deltanet_qk_norm(Pass& p);
void deltanet_scan(Pass& p, const LayerParams& lp);
void deltanet_out_norm(Pass& p, const LayerParams& lp);
// Mixture of experts (forward_experts.cpp):
void moe_experts(Pass& p, const LayerParams& lp);
void shared_expert_gate(Pass& p, const LayerParams& lp);

}  // namespace dl::cpu
