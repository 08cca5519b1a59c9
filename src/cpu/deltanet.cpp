// The per-token pieces of the Gated DeltaNet mixer: conv + SiLU, q/k normalisation, the gates, the
// gated output norm, and the one-token recurrence used by decode. The chunked prefill form lives
// in deltanet_chunked.cpp.
#include "cpu/deltanet.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/threads.h"
#include "cpu/deltanet_simd.h"

namespace dl::cpu::deltanet {
namespace {

using simd::Vec;

// Runs fn(begin, end) over [0, n) on the pool, or on the caller without one.
template <typename Fn>
void for_range(ThreadPool* pool, int64_t n, int64_t min_chunk, Fn&& fn) {
    if (n <= 0) return;
    if (!pool || n <= min_chunk) {
        fn(int64_t{0}, n);
        return;
    }
    pool->for_range(
        n, [&](int64_t b, int64_t e, int) { fn(b, e); }, min_chunk);
}

inline float silu(float x) {
    return x / (1.0f + std::exp(-x));
}

// PyTorch's softplus with beta 1 and threshold 20: linear above the threshold.
inline float softplus(float x) {
    return x > 20.0f ? x : std::log1p(std::exp(x));
}

constexpr int64_t kMaxConvKernel = 16;
constexpr int64_t kConvBlock = 64;  // channels per block: weights transposed on the stack

// Channels [c0, c0 + n) of conv_silu. Outputs are written newest first so that out may be x:
// row t reads inputs t-K+1..t only, which a descending sweep has not yet overwritten.
DL_DELTANET_KERNEL
void conv_block(int64_t T, int64_t channels, int64_t K, int64_t c0, int64_t n, const float* x,
                const float* w, float* state, float* out) {
    float wt[kMaxConvKernel][kConvBlock];  // wt[j][c]: tap j of channel c0 + c
    float next[kMaxConvKernel][kConvBlock];
    for (int64_t c = 0; c < n; ++c)
        for (int64_t j = 0; j < K; ++j) wt[j][c] = w[(c0 + c) * K + j];
    // Input row r of the concatenation [state; x], r in [0, K-1+T).
    auto row = [&](int64_t r) -> const float* {
        return r < K - 1 ? state + r * channels + c0 : x + (r - (K - 1)) * channels + c0;
    };
    for (int64_t r = 0; r < K - 1; ++r) std::copy_n(row(T + r), n, next[r]);
    for (int64_t t = T - 1; t >= 0; --t) {
        float acc[kConvBlock] = {};
        for (int64_t j = 0; j < K; ++j) {
            const float* in = row(t + j);
            for (int64_t c = 0; c < n; ++c) acc[c] += wt[j][c] * in[c];
        }
        float* o = out + t * channels + c0;
        for (int64_t c = 0; c < n; ++c) o[c] = silu(acc[c]);
    }
    for (int64_t r = 0; r < K - 1; ++r) std::copy_n(next[r], n, state + r * channels + c0);
}

// One head vector: x * rsqrt(sum(x^2) + eps) * scale.
inline void l2norm_scale(float* x, int64_t d, float scale) {
    float ss = 0.0f;
    for (int64_t i = 0; i < d; ++i) ss += x[i] * x[i];
    const float f = scale / std::sqrt(ss + kL2NormEps);
    for (int64_t i = 0; i < d; ++i) x[i] *= f;
}

// Columns [j0, j0 + NV * lanes<V>) of one head's step. A column j of S only ever meets column j
// of d and o, so both passes over S run per column block: the block (d_k x 32 floats = 16 KiB
// at d_k = 128) is read from L2 once and is still in L1 for the second pass. The decay is folded
// into the reads: S^T k is taken on the undecayed S and scaled once.
template <typename V, int NV>
DL_DELTANET_INLINE void step_columns(int64_t d_k, int64_t d_v, int64_t j0, float* S, const float* q,
                                     const float* k, const float* v, float decay, float beta,
                                     float* o) {
    constexpr int L = simd::lanes<V>;
    // Two sets of accumulators (even and odd rows of S) so that the sums are not one long
    // chain of dependent FMAs.
    V kv[2][NV] = {};
    int64_t i = 0;
    for (; i + 2 <= d_k; i += 2) {
        for (int e = 0; e < 2; ++e) {
            const V ki = simd::splat<V>(k[i + e]);
            const float* row = S + (i + e) * d_v + j0;
            for (int n = 0; n < NV; ++n) kv[e][n] += ki * simd::load<V>(row + n * L);
        }
    }
    for (; i < d_k; ++i) {
        const V ki = simd::splat<V>(k[i]);
        for (int n = 0; n < NV; ++n) kv[0][n] += ki * simd::load<V>(S + i * d_v + j0 + n * L);
    }
    const V decay_v = simd::splat<V>(decay), beta_v = simd::splat<V>(beta);
    V delta[NV], acc[2][NV] = {};
    for (int n = 0; n < NV; ++n)
        delta[n] = beta_v * (simd::load<V>(v + j0 + n * L) - decay_v * (kv[0][n] + kv[1][n]));
    auto update = [&](int64_t r, V* out) DL_DELTANET_INLINE_LAMBDA {
        const V kr = simd::splat<V>(k[r]), qr = simd::splat<V>(q[r]);
        float* row = S + r * d_v + j0;
        for (int n = 0; n < NV; ++n) {
            const V s = decay_v * simd::load<V>(row + n * L) + kr * delta[n];
            simd::store<V>(row + n * L, s);
            out[n] += qr * s;
        }
    };
    for (i = 0; i + 2 <= d_k; i += 2) {
        update(i, acc[0]);
        update(i + 1, acc[1]);
    }
    if (i < d_k) update(i, acc[0]);
    for (int n = 0; n < NV; ++n) simd::store<V>(o + j0 + n * L, acc[0][n] + acc[1][n]);
}

DL_DELTANET_KERNEL
void step_head(int64_t d_k, int64_t d_v, float* S, const float* q, const float* k, const float* v,
               float g, float beta, float* o) {
    const float decay = simd::flush_tiny(std::exp(g));
    int64_t j = 0;
    for (; j + 4 * simd::kLanes <= d_v; j += 4 * simd::kLanes)
        step_columns<Vec, 4>(d_k, d_v, j, S, q, k, v, decay, beta, o);
    for (; j + simd::kLanes <= d_v; j += simd::kLanes)
        step_columns<Vec, 1>(d_k, d_v, j, S, q, k, v, decay, beta, o);
    for (; j < d_v; ++j) step_columns<float, 1>(d_k, d_v, j, S, q, k, v, decay, beta, o);
}

}  // namespace

void conv_silu(int64_t T, int64_t channels, int64_t K, const float* x, const float* w, float* state,
               float* out, ThreadPool* pool) {
    if (K < 1 || K > kMaxConvKernel)
        fail("DeltaNet conv kernel size {} is outside the supported range 1..{}", K,
             kMaxConvKernel);
    if (T <= 0 || channels <= 0) return;
    const int64_t blocks = (channels + kConvBlock - 1) / kConvBlock;
    for_range(pool, blocks, 4, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            const int64_t c0 = i * kConvBlock;
            conv_block(T, channels, K, c0, std::min(kConvBlock, channels - c0), x, w, state, out);
        }
    });
}

void normalize_qk(const Shape& s, int64_t T, float* qkv, ThreadPool* pool) {
    const int64_t heads = 2 * s.n_k_heads, width = s.conv_dim();
    const float q_scale = 1.0f / std::sqrt(static_cast<float>(s.d_k));
    for_range(pool, T * heads, 64, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            const int64_t t = i / heads, h = i % heads;
            l2norm_scale(qkv + t * width + h * s.d_k, s.d_k, h < s.n_k_heads ? q_scale : 1.0f);
        }
    });
}

void gates(int64_t T, int64_t n_v_heads, const float* b_raw, const float* a_raw,
           const float* dt_bias, const float* ssm_a, float* beta, float* g) {
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t h = 0; h < n_v_heads; ++h) {
            const int64_t i = t * n_v_heads + h;
            beta[i] = 1.0f / (1.0f + std::exp(-b_raw[i]));
            g[i] = softplus(a_raw[i] + dt_bias[h]) * ssm_a[h];
        }
    }
}

void step(const Shape& s, float* S, const float* q, const float* k, const float* v, const float* g,
          const float* beta, float* o, ThreadPool* pool) {
    auto head = [&](int64_t h) {
        simd::FlushSubnormals flush;
        const int64_t j = h % s.n_k_heads;
        step_head(s.d_k, s.d_v, S + h * s.d_k * s.d_v, q + j * s.d_k, k + j * s.d_k, v + h * s.d_v,
                  g[h], beta[h], o + h * s.d_v);
    };
    if (pool)
        pool->run(s.n_v_heads, [&](int64_t h, int) { head(h); });
    else
        for (int64_t h = 0; h < s.n_v_heads; ++h) head(h);
}

void gated_norm(const Shape& s, int64_t T, const float* o, const float* z, const float* w_norm,
                float eps, float* y, ThreadPool* pool) {
    const int64_t d = s.d_v;
    for_range(pool, T * s.n_v_heads, 64, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            const float* oi = o + i * d;
            const float* zi = z + i * d;
            float* yi = y + i * d;
            float ss = 0.0f;
            for (int64_t c = 0; c < d; ++c) ss += oi[c] * oi[c];
            const float r = 1.0f / std::sqrt(ss / static_cast<float>(d) + eps);
            for (int64_t c = 0; c < d; ++c) yi[c] = oi[c] * r * w_norm[c] * silu(zi[c]);
        }
    });
}

}  // namespace dl::cpu::deltanet
