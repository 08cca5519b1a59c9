// What the chain's per-architecture forward files (forward_llama.cpp, forward_qwen35.cpp) share
// with its driver (chain.cpp): the f32 copies of the small parameters, the session (state and
// preallocated scratch), and the mixers, each reading the normed input rows s.xn and writing the
// mixer output rows s.out for the T tokens at positions s.n_past...
#pragma once

#include <cstdint>
#include <vector>

#include "cpu/chain.h"
#include "cpu/deltanet.h"
#include "cpu/matmul.h"
#include "model/model.h"

namespace dl::cpu {

struct LayerParams {
    std::vector<float> attn_norm, ffn_norm, q_norm, k_norm;
    std::vector<float> conv1d, dt_bias, ssm_a, ssm_norm;  // Gated DeltaNet
    int64_t slot = 0;  // index among the layers of its kind (KV cache or DeltaNet state)
};

struct ChainWeights {
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
    std::vector<float> qkv, z, beta, g, y;  // DeltaNet
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

// llama / qwen3 attention (qwen3: with per-head q/k norms).
void attention_llama(Pass& p, int64_t il);
// qwen35: gated attention with partial NeoX rotary, and the Gated DeltaNet mixer.
void attention_qwen35(Pass& p, int64_t il);
void deltanet_qwen35(Pass& p, int64_t il);

// Shared by the attention mixers: the normed input rows s.xn through W_q, W_k, W_v into the
// rows of s.q [T][q_width], s.k and s.v [T][kv_width].
void project_qkv(Pass& p, const Layer& L);
// Shared by the attention mixers: for each token, the rotary angles of its position, then for every
// query head of s.q (head h at h * q_head_stride) and every key head of s.k, the per-head RMS norm
// (only when the layer has q/k norm weights) and the rotation of the first rope_dims dims, NeoX
// halves or interleaved pairs.
void norm_and_rope_qk(Pass& p, const LayerParams& lp, int64_t q_head_stride, bool neox);

// Shared by the attention mixers: stores k, v rows [T][kv_width] at positions pos0.. in the
// layer's cache, then attends every query head of q (rows of q_stride floats, head h at
// h * q_head_stride) over its kv head, writing o [T][n_head * head_dim].
void store_kv_and_attend(Pass& p, int64_t slot, const float* q, int64_t q_stride,
                         int64_t q_head_stride);

}  // namespace dl::cpu
