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
    for (int r = 0; r < MR; ++r) {
        for (int n = 0; n < NV; ++n) {
            float* c = C + r * ldc + n * L;
            V out = acc[r][n];
            if (alpha != 0.0f) out += alpha * simd::load<V>(c);
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
// wanted (the rest of each 6-row block is computed and left as garbage). lower_a: A[i][p] == 0
// for p > i, so each row block stops the sum at its last row.
DL_DELTANET_INLINE void gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                             const float* B, int64_t ldb, float* C, int64_t ldc, float alpha,
                             bool lower_c = false, bool lower_a = false) {
    constexpr int64_t MR = 6;
    for (int64_t r = 0; r < M; r += MR) {
        const int64_t mr = std::min(MR, M - r);
        const int64_t n = lower_c ? std::min(N, r + mr) : N;
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

// Floats of scratch one head needs for chunks of C tokens.
int64_t scratch_floats(const Shape& s, int64_t C) {
    return s.d_k * C + 2 * C * C + C * (s.d_v + s.d_k) + 3 * C;
}

// All chunks of value head h, in order; S is that head's d_k x d_v state.
DL_DELTANET_KERNEL
void chunked_head(const Shape& s, int64_t h, int64_t T, int64_t C, float* S, const Rows& rows,
                  const float* g, const float* beta, float* o, float* scratch) {
    const int64_t dk = s.d_k, dv = s.d_v, Hv = s.n_v_heads, j = h % s.n_k_heads;
    const int64_t w = dv + dk;  // a row of [U | -W], later [D | -W]
    const int64_t ldo = Hv * dv;
    float* KT = scratch;        // [d_k][C]: k_s transposed, later scaled by Γ[last][s]
    float* A = KT + dk * C;     // [C][C]: k_t·k_s, then the negated strictly lower A
    float* P = A + C * C;       // [C][C]: q_t·k_s, then Γ ⊙ (lower incl. diagonal)
    float* UW = P + C * C;      // [C][w]
    float* gamma = UW + C * w;  // [C]: Γ[t][s] for the current row t
    float* eg = gamma + C;      // [C]: exp(g_t)
    float* eG = eg + C;         // [C]: exp(G_t), product of exp(g) from the chunk start

    for (int64_t t0 = 0; t0 < T; t0 += C) {
        const int64_t L = std::min(C, T - t0);
        const float* q0 = rows.q + t0 * rows.q_stride + j * dk;
        const float* k0 = rows.k + t0 * rows.k_stride + j * dk;
        const float* v0 = rows.v + t0 * rows.v_stride + h * dv;
        float* o0 = o + t0 * ldo + h * dv;

        for (int64_t t = 0; t < L; ++t) {
            eg[t] = std::exp(g[(t0 + t) * Hv + h]);
            eG[t] = t ? eG[t - 1] * eg[t] : eg[t];
            const float* kt = k0 + t * rows.k_stride;
            for (int64_t i = 0; i < dk; ++i) KT[i * C + t] = kt[i];
        }
        gemm(L, L, dk, k0, rows.k_stride, KT, C, A, C, 0.0f, /*lower_c=*/true);
        gemm(L, L, dk, q0, rows.q_stride, KT, C, P, C, 0.0f, /*lower_c=*/true);

        // Row t of Γ from row t-1: one more factor exp(g_t) on every earlier column.
        for (int64_t t = 0; t < L; ++t) {
            const float bt = beta[(t0 + t) * Hv + h];
            for (int64_t u = 0; u < t; ++u) gamma[u] *= eg[t];
            gamma[t] = 1.0f;
            float* at = A + t * C;
            float* pt = P + t * C;
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
            if (b > 0) gemm(mb, w, b, A + b * C, C, UW, w, UW + b * w, w, 1.0f);
            for (int64_t t = b + 1; t < b + mb; ++t) {
                float* x = UW + t * w;
                for (int64_t u = b; u < t; ++u) {
                    const float a = A[t * C + u];
                    const float* xu = UW + u * w;
                    for (int64_t c = 0; c < w; ++c) x[c] += a * xu[c];
                }
            }
        }

        // D = U + (-W) S0, in place of U.
        gemm(L, dv, dk, UW + dv, w, S, dv, UW, w, 1.0f);
        // O = diag(e^G) Q S0 + P D.
        gemm(L, dv, dk, q0, rows.q_stride, S, dv, o0, ldo, 0.0f);
        for (int64_t t = 0; t < L; ++t) {
            float* ot = o0 + t * ldo;
            for (int64_t c = 0; c < dv; ++c) ot[c] *= eG[t];
        }
        gemm(L, dv, L, P, C, UW, w, o0, ldo, 1.0f, /*lower_c=*/false, /*lower_a=*/true);
        // S = e^(G_last) S0 + (diag(Γ[last]) K)^T D; gamma holds row L-1 of Γ now.
        for (int64_t i = 0; i < dk; ++i)
            for (int64_t u = 0; u < L; ++u) KT[i * C + u] *= gamma[u];
        gemm(dk, dv, L, KT, C, UW, w, S, dv, eG[L - 1]);
    }
}

void run_chunked(const Shape& s, int64_t T, int64_t C, float* S, const Rows& rows, const float* g,
                 const float* beta, float* o, ThreadPool* pool) {
    if (C < 1) fail("DeltaNet chunk size must be at least 1, got {}", C);
    if (T <= 0) return;
    C = std::min(C, T);
    const int64_t need = scratch_floats(s, C);
    auto head = [&](int64_t h) {
        // Grows once per thread to the largest shape seen; no allocation after that.
        thread_local std::vector<float> scratch;
        if (static_cast<int64_t>(scratch.size()) < need) scratch.resize(need);
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
