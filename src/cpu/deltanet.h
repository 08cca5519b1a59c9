// CPU kernels of the Gated DeltaNet (GDN) mixer of Qwen3.5 / Qwen3-Next: the causal depthwise
// conv + SiLU, q/k preparation, the gates, the delta-rule recurrence in its one-token form (decode)
// and its chunked WY form (prefill), and the gated RMSNorm on the output. The projections around
// them (W_qkv, W_gate, W_beta, W_alpha, W_ssm_out) belong to the forward pass.
//
// Per value head h (q/k head j = h mod H_k, the GGUF order), S_h is d_k x d_v, row-major F32:
//     S = exp(g_h) * S;  d = beta_h * (v_h - S^T k_j);  S += k_j (x) d;  o_h = S^T q_j
// with q, k already l2-normalised and q scaled by 1/sqrt(d_k) (normalize_qk).
//
// All functions thread over heads or channels when given a pool; nullptr runs on the caller.
// step() and chunked() flush subnormal floats to zero (and decay factors below 1e-20): values
// that small cannot change a result, and they cost ~100 cycles per operation on x86.
#pragma once

#include <cstdint>

namespace dl {
class ThreadPool;
}

namespace dl::cpu::deltanet {

struct Shape {
    int64_t n_k_heads;  // H_k: q/k heads (GGUF ssm.group_count)
    int64_t n_v_heads;  // H_v: value heads (GGUF ssm.time_step_rank)
    int64_t d_k;        // q/k head size (ssm.state_size)
    int64_t d_v;        // value head size
    int64_t qk_width() const { return n_k_heads * d_k; }
    int64_t v_width() const { return n_v_heads * d_v; }
    // One row of the conv output: q | k | v.
    int64_t conv_dim() const { return 2 * qk_width() + v_width(); }
};

// The reference l2norm: x * rsqrt(sum(x^2) + eps).
constexpr float kL2NormEps = 1e-6f;

// Causal depthwise conv over time followed by SiLU, for T new rows.
//   x: [T][channels]; w: [channels][K] (GGUF ssm_conv1d, ne = {K, channels}); tap K-1 multiplies
//   the newest input. state: [K-1][channels], the last K-1 inputs before this call, oldest first;
//   updated in place to the last K-1 inputs after it (also when T < K-1). out: [T][channels],
//   may be the same buffer as x (not overlapping otherwise); must not overlap state.
// 1 <= K <= 16.
void conv_silu(int64_t T, int64_t channels, int64_t K, const float* x, const float* w, float* state,
               float* out, ThreadPool* pool = nullptr);

// In place on the conv output rows qkv: [T][conv_dim()] (q | k | v per row): l2-normalises every
// q and k head with the reference formula and scales q by 1/sqrt(d_k). v is left alone.
void normalize_qk(const Shape& s, int64_t T, float* qkv, ThreadPool* pool = nullptr);

// The per-head gates, for [T][H_v]: beta = sigmoid(b_raw), g = softplus(a_raw + dt_bias) * ssm_a
// (ssm_a as the GGUF holds it: -exp(A_log)); softplus is PyTorch's (threshold 20).
// beta may be b_raw and g may be a_raw (in place).
void gates(int64_t T, int64_t n_v_heads, const float* b_raw, const float* a_raw,
           const float* dt_bias, const float* ssm_a, float* beta, float* g);

// One token. S: [H_v][d_k][d_v]; q, k: [H_k][d_k]; v: [H_v][d_v]; g, beta: [H_v]; o: [H_v][d_v].
// With the conv output row r: q = r, k = r + qk_width(), v = r + 2 * qk_width().
void step(const Shape& s, float* S, const float* q, const float* k, const float* v, const float* g,
          const float* beta, float* o, ThreadPool* pool = nullptr);

// T tokens in chunks of C tokens (the WY / UT-transform form): equals step() applied T times, up
// to float rounding. Any T >= 0 and C >= 1 (the last chunk may be short); on CPUs C = 16 is the
// fastest (fewer intra-chunk products, same work on S), 32 and 64 within ~20%. Layouts as step()
// with a leading [T]: q, k: [T][H_k][d_k]; v: [T][H_v][d_v]; g, beta: [T][H_v]; o: [T][H_v][d_v].
void chunked(const Shape& s, int64_t T, int64_t C, float* S, const float* q, const float* k,
             const float* v, const float* g, const float* beta, float* o,
             ThreadPool* pool = nullptr);

// chunked() reading q, k, v straight from the conv output rows qkv: [T][conv_dim()].
void chunked_qkv(const Shape& s, int64_t T, int64_t C, float* S, const float* qkv, const float* g,
                 const float* beta, float* o, ThreadPool* pool = nullptr);

// The output gate per token and value head: y = rmsnorm(o_h over d_v, eps) * w_norm * silu(z_h).
// o, z, y: [T][H_v][d_v]; w_norm: [d_v] (GGUF ssm_norm, used as is). y may be o or z.
void gated_norm(const Shape& s, int64_t T, const float* o, const float* z, const float* w_norm,
                float eps, float* y, ThreadPool* pool = nullptr);

}  // namespace dl::cpu::deltanet
