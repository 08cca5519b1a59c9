// The chunked (WY / UT-transform) form of the gated delta rule, for prefill.
//
// Within a chunk of L tokens starting from state S0, with Γ[t][s] = exp(G_t - G_s) (G the running
// sum of g inside the chunk) and β the per-token beta, unrolling the recurrence gives
//     D = (I + A)^-1 (diag(β) V - diag(β e^G) K S0),   A[t][s] = β_t Γ[t][s] k_t·k_s  (s < t)
//     O = diag(e^G) Q S0 + (Γ ⊙ Q K^T, s <= t) D
//     S = e^(G_last) S0 + (diag(Γ[last]) K)^T D
// where row t of D is the d_t the one-token form computes. So S0 is touched by three dense
// products per chunk, and the only sequential work is one unit-lower-triangular solve of size L.
// The decays are products of exp(g_t) (as in step()), never differences of large sums.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/threads.h"
#include "cpu/deltanet.h"
#include "cpu/deltanet_simd.h"

namespace dl::cpu::deltanet {
namespace {

using simd::Vec;

// One MR-row tile of C = alpha * C + A * B over NV * lanes<V> columns.
template <int MR, typename V, int NV>
DL_DELTANET_INLINE void gemm_tile(int64_t K, const float* A, int64_t lda, const float* B,
                                  int64_t ldb, float* C, int64_t ldc, float alpha) {
    constexpr int L = simd::lanes<V>;
    V acc[MR][NV] = {};
    for (int64_t p = 0; p < K; ++p) {
        V b[NV];
        for (int n = 0; n < NV; ++n) b[n] = simd::load<V>(B + p * ldb + n * L);
        for (int r = 0; r < MR; ++r) {
            const V a = simd::splat<V>(A[r * lda + p]);
            for (int n = 0; n < NV; ++n) acc[r][n] += a * b[n];
        }
    }
    const V alpha_v = simd::splat<V>(alpha);
    for (int r = 0; r < MR; ++r) {
        for (int n = 0; n < NV; ++n) {
            float* c = C + r * ldc + n * L;
            V out = acc[r][n];
            if (alpha != 0.0f) out += alpha_v * simd::load<V>(c);
            simd::store<V>(c, out);
        }
    }
}

template <int MR>
DL_DELTANET_INLINE void gemm_rows(int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                                  int64_t ldb, float* C, int64_t ldc, float alpha) {
    constexpr int64_t W = simd::kLanes;
    int64_t j = 0;
    for (; j + 2 * W <= N; j += 2 * W)
        gemm_tile<MR, Vec, 2>(K, A, lda, B + j, ldb, C + j, ldc, alpha);
    for (; j + W <= N; j += W) gemm_tile<MR, Vec, 1>(K, A, lda, B + j, ldb, C + j, ldc, alpha);
    for (; j < N; ++j) gemm_tile<MR, float, 1>(K, A, lda, B + j, ldb, C + j, ldc, alpha);
}

// C[M][N] = alpha * C + A[M][K] * B[K][N], all row-major with leading dimensions. alpha == 0
// writes C without reading it (it may hold anything). lower_c: only columns j <= i of row i are
// wanted; each 6-row block computes whole 8-column groups up to its last row (so B and C must
// hold N rounded up to 8 columns) and leaves the extra entries as garbage. lower_a: A[i][p] == 0
// for p > i, so each row block stops the sum at its last row.
DL_DELTANET_INLINE void gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                             const float* B, int64_t ldb, float* C, int64_t ldc, float alpha,
                             bool lower_c = false, bool lower_a = false) {
    constexpr int64_t MR = 6;
    for (int64_t r = 0; r < M; r += MR) {
        const int64_t mr = std::min(MR, M - r);
        const int64_t n =
            lower_c ? std::min(N, (r + mr + simd::kLanes - 1) / simd::kLanes * simd::kLanes) : N;
        const int64_t k = lower_a ? std::min(K, r + mr) : K;
        const float* a = A + r * lda;
        float* c = C + r * ldc;
        switch (mr) {
            case 6:
                gemm_rows<6>(n, k, a, lda, B, ldb, c, ldc, alpha);
                break;
            case 5:
                gemm_rows<5>(n, k, a, lda, B, ldb, c, ldc, alpha);
                break;
            case 4:
                gemm_rows<4>(n, k, a, lda, B, ldb, c, ldc, alpha);
                break;
            case 3:
                gemm_rows<3>(n, k, a, lda, B, ldb, c, ldc, alpha);
                break;
            case 2:
                gemm_rows<2>(n, k, a, lda, B, ldb, c, ldc, alpha);
                break;
            default:
                gemm_rows<1>(n, k, a, lda, B, ldb, c, ldc, alpha);
                break;
        }
    }
}

// Where the rows of one value head live: row t of q/k head j is q + t * q_stride + j * d_k, etc.
struct Rows {
    const float* q;
    const float* k;
    const float* v;
    int64_t q_stride, k_stride, v_stride;
};

// Leading dimension for a scratch matrix with rows of n floats: an odd number of 64-byte lines,
// so that walking down a column visits every L1 set instead of piling onto a few of them (a
// 512-byte row stride thrashes the 8-12 ways of a set).
int64_t padded(int64_t n) {
    const int64_t lines = (n + 15) / 16;
    return 16 * (lines % 2 ? lines : lines + 1);
}

// Where one head's scratch lives, for chunks of C tokens.
struct Scratch {
    int64_t ld_s, ld_c, ld_w;  // leading dimensions: state copy, [.][C] matrices, [U | -W]
    int64_t s_off, kt_off, a_off, p_off, uw_off, gamma_off, eg_off, eG_off, total;
    Scratch(const Shape& s, int64_t C) {
        ld_s = padded(s.d_v);
        ld_c = padded(C);
        ld_w = padded(s.d_v + s.d_k);
        s_off = 0;
        kt_off = s_off + s.d_k * ld_s;
        a_off = kt_off + s.d_k * ld_c;
        p_off = a_off + C * ld_c;
        uw_off = p_off + C * ld_c;
        gamma_off = uw_off + C * ld_w;
        eg_off = gamma_off + C;
        eG_off = eg_off + C;
        total = eG_off + C;
    }
};

// All chunks of value head h, in order; S_out is that head's d_k x d_v state. The state is worked
// on in a copy with a padded row stride (see padded()) and written back at the end.
DL_DELTANET_KERNEL
void chunked_head(const Shape& s, int64_t h, int64_t T, int64_t C, float* S_out, const Rows& rows,
                  const float* g, const float* beta, float* o, float* scratch) {
    const int64_t dk = s.d_k, dv = s.d_v, Hv = s.n_v_heads, j = h % s.n_k_heads;
    const int64_t ldo = Hv * dv;
    const Scratch lay(s, C);
    const int64_t lds = lay.ld_s, ldc = lay.ld_c, w = lay.ld_w;
    float* S = scratch + lay.s_off;    // [d_k][lds]: the state
    float* KT = scratch + lay.kt_off;  // [d_k][ldc]: k_s transposed, later * Γ[last][s]
    float* A = scratch + lay.a_off;    // [C][ldc]: k_t·k_s, then the negated strict lower A
    float* P = scratch + lay.p_off;    // [C][ldc]: q_t·k_s, then Γ ⊙ (lower incl. diagonal)
    float* UW = scratch + lay.uw_off;  // [C][w]: [U | -W], later [D | -W]
    float* gamma = scratch + lay.gamma_off;  // [C]: Γ[t][s] for the current row t
    float* eg = scratch + lay.eg_off;        // [C]: exp(g_t)
    float* eG = scratch + lay.eG_off;        // [C]: exp(G_t), product of exp(g) from chunk start
    for (int64_t i = 0; i < dk; ++i) std::copy_n(S_out + i * dv, dv, S + i * lds);

    for (int64_t t0 = 0; t0 < T; t0 += C) {
        const int64_t L = std::min(C, T - t0);
        const float* q0 = rows.q + t0 * rows.q_stride + j * dk;
        const float* k0 = rows.k + t0 * rows.k_stride + j * dk;
        const float* v0 = rows.v + t0 * rows.v_stride + h * dv;
        float* o0 = o + t0 * ldo + h * dv;

        for (int64_t t = 0; t < L; ++t) {
            eg[t] = simd::flush_tiny(std::exp(g[(t0 + t) * Hv + h]));
            eG[t] = t ? simd::flush_tiny(eG[t - 1] * eg[t]) : eg[t];
            const float* kt = k0 + t * rows.k_stride;
            for (int64_t i = 0; i < dk; ++i) KT[i * ldc + t] = kt[i];
        }
        // Whole 8-column groups (zero padding in KT) keep the k.k and q.k products on vectors.
        const int64_t L8 = (L + simd::kLanes - 1) / simd::kLanes * simd::kLanes;
        for (int64_t i = 0; i < dk; ++i) std::fill(KT + i * ldc + L, KT + i * ldc + L8, 0.0f);
        gemm(L, L8, dk, k0, rows.k_stride, KT, ldc, A, ldc, 0.0f, /*lower_c=*/true);
        gemm(L, L8, dk, q0, rows.q_stride, KT, ldc, P, ldc, 0.0f, /*lower_c=*/true);

        // Row t of Γ from row t-1: one more factor exp(g_t) on every earlier column.
        for (int64_t t = 0; t < L; ++t) {
            const float bt = beta[(t0 + t) * Hv + h];
            for (int64_t u = 0; u < t; ++u) gamma[u] = simd::flush_tiny(gamma[u] * eg[t]);
            gamma[t] = 1.0f;
            float* at = A + t * ldc;
            float* pt = P + t * ldc;
            for (int64_t u = 0; u < t; ++u) at[u] = -bt * gamma[u] * at[u];
            for (int64_t u = 0; u <= t; ++u) pt[u] *= gamma[u];
            std::fill(at + t, at + L, 0.0f);
            std::fill(pt + t + 1, pt + L, 0.0f);
            // Right-hand side [β v | -β e^G k]; the solve is linear, so -W comes out negated.
            const float* vt = v0 + t * rows.v_stride;
            const float* kt = k0 + t * rows.k_stride;
            float* x = UW + t * w;
            const float bk = -bt * eG[t];
            for (int64_t c = 0; c < dv; ++c) x[c] = bt * vt[c];
            for (int64_t c = 0; c < dk; ++c) x[dv + c] = bk * kt[c];
        }

        // (I + A) X = R by blocks of rows: everything before the block in one product, then the
        // small triangle inside it row by row.
        constexpr int64_t kSolveBlock = 8;
        for (int64_t b = 0; b < L; b += kSolveBlock) {
            const int64_t mb = std::min(kSolveBlock, L - b);
            if (b > 0) gemm(mb, w, b, A + b * ldc, ldc, UW, w, UW + b * w, w, 1.0f);
            for (int64_t t = b + 1; t < b + mb; ++t) {
                float* x = UW + t * w;
                for (int64_t u = b; u < t; ++u) {
                    const float a = A[t * ldc + u];
                    const float* xu = UW + u * w;
                    for (int64_t c = 0; c < w; ++c) x[c] += a * xu[c];
                }
            }
        }

        // D = U + (-W) S0, in place of U.
        gemm(L, dv, dk, UW + dv, w, S, lds, UW, w, 1.0f);
        // O = diag(e^G) Q S0 + P D.
        gemm(L, dv, dk, q0, rows.q_stride, S, lds, o0, ldo, 0.0f);
        for (int64_t t = 0; t < L; ++t) {
            float* ot = o0 + t * ldo;
            for (int64_t c = 0; c < dv; ++c) ot[c] *= eG[t];
        }
        gemm(L, dv, L, P, ldc, UW, w, o0, ldo, 1.0f, /*lower_c=*/false, /*lower_a=*/true);
        // S = e^(G_last) S0 + (diag(Γ[last]) K)^T D; gamma holds row L-1 of Γ now.
        for (int64_t i = 0; i < dk; ++i)
            for (int64_t u = 0; u < L; ++u) KT[i * ldc + u] *= gamma[u];
        gemm(dk, dv, L, KT, ldc, UW, w, S, lds, eG[L - 1]);
    }
    for (int64_t i = 0; i < dk; ++i) std::copy_n(S + i * lds, dv, S_out + i * dv);
}

void run_chunked(const Shape& s, int64_t T, int64_t C, float* S, const Rows& rows, const float* g,
                 const float* beta, float* o, ThreadPool* pool) {
    if (C < 1) fail("DeltaNet chunk size must be at least 1, got {}", C);
    if (T <= 0) return;
    C = std::min(C, T);
    const int64_t need = Scratch(s, C).total;
    auto head = [&](int64_t h) {
        // Grows once per thread to the largest shape seen; no allocation after that.
        thread_local std::vector<float> scratch;
        if (static_cast<int64_t>(scratch.size()) < need) scratch.resize(need);
        simd::FlushSubnormals flush;
        chunked_head(s, h, T, C, S + h * s.d_k * s.d_v, rows, g, beta, o, scratch.data());
    };
    if (pool)
        pool->run(s.n_v_heads, [&](int64_t h, int) { head(h); });
    else
        for (int64_t h = 0; h < s.n_v_heads; ++h) head(h);
}

}  // namespace

void chunked(const Shape& s, int64_t T, int64_t C, float* S, const float* q, const float* k,
             const float* v, const float* g, const float* beta, float* o, ThreadPool* pool) {
    const Rows rows{q, k, v, s.qk_width(), s.qk_width(), s.v_width()};
    run_chunked(s, T, C, S, rows, g, beta, o, pool);
}

void chunked_qkv(const Shape& s, int64_t T, int64_t C, float* S, const float* qkv, const float* g,
                 const float* beta, float* o, ThreadPool* pool) {
    const int64_t width = s.conv_dim();
    const Rows rows{qkv, qkv + s.qk_width(), qkv + 2 * s.qk_width(), width, width, width};
    run_chunked(s, T, C, S, rows, g, beta, o, pool);
}

}  // namespace dl::cpu::deltanet
