// What the chain's step files (forward_attention.cpp, forward_deltanet.cpp) share with its driver
// (chain.cpp): the f32 copies of the small parameters, the session (state and preallocated
// scratch), and the steps of the forward pass (model/forward_pass.h) that are more than a norm or
// a matrix product, each working on the rows of the T tokens at positions s.n_past...
#pragma once

#include <cstdint>
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
};

struct ChainSession : SessionState {
    const Chain* owner = nullptr;
    int64_t window = 0;  // scratch rows
    // Attention KV rows per attention layer: [n_ctx][n_kv * head_dim], f16 or f32.
    std::vector<std::vector<uint16_t>> k16, v16;
    std::vector<std::vector<float>> k32, v32;
    // Per DeltaNet layer: the last K-1 conv inputs [K-1][conv_dim] and S [H_v][d_k][d_v].
    std::vector<std::vector<float>> conv_state, ssm_state;

    // Scratch rows, [window][width].
    std::vector<float> x, xn, out;          // residual stream, normed input, mixer/FFN output
    std::vector<float> q, k, v, o;          // attention (q holds [q | gate] per head on qwen35)
    std::vector<float> qkv, z, beta, g, y;  // DeltaNet (g holds alpha, then the decay)
    std::vector<float> gate, up;            // FFN
    std::vector<float> rope_cos, rope_sin;  // [window][rope_dims / 2]
    std::vector<float> scores;              // [threads][n_ctx]
    std::vector<float> logits;              // the last decoded token's (Chain::decode)
    Activations act;
};

// Everything a mixer needs for one window.
struct Pass {
    const Model& model;
    const ChainWeights& w;
    const ChainOptions& opt;
    ChainSession& s;
    ThreadPool& pool;
    int64_t T;     // tokens in this window
    int64_t pos0;  // position of the first
    bool decode;   // one token through the step form
};

// The steps of model/forward_pass.h that are more than a norm or a matrix product, each on the
// window's rows. Attention (forward_attention.cpp):
void qk_norm(Pass& p, const LayerParams& lp);
void rope(Pass& p);
void attention(Pass& p, const LayerParams& lp);  // k, v into the KV cache, then s.o
void output_gate(Pass& p);
// Gated DeltaNet (forward_deltanet.cpp):
void deltanet_gates(Pass& p, const LayerParams& lp);
void deltanet_conv(Pass& p, const LayerParams& lp);
void deltanet_qk_norm(Pass& p);
void deltanet_scan(Pass& p, const LayerParams& lp);
void deltanet_out_norm(Pass& p, const LayerParams& lp);

}  // namespace dl::cpu
