// Y = X·Wᵀ for a window of rows (prefill): X is [M][K] F32 activations (row stride K), W is
// [N][K] in its GGUF block format (WTYPE_* define), Y is [M][N] F32 (row stride N), written or
// added to (mode 1: the residual stream). One workgroup computes a 64×64 tile of Y; the weight
// tile is dequantized from its native blocks (unit_values) into shared memory once per tile and
// reused by all 64 rows of the window, which is what makes prefill compute-bound instead of
// re-reading every weight per row as the decode GEMV does.
//   VARIANT_SCALAR       FMA tiles in F32: 128 threads, each 4 rows × 8 columns; any device.
//   VARIANT_KHR_COOPMAT  the tiles staged as F16 and multiplied by cooperative matrices (16×16×16,
//                        F32 accumulators): 4 subgroups, each a 32×32 quarter of the tile.
// Edges: rows of X past M and columns past K read as 0; weight rows past N are clamped to N-1
// (read, never stored), so any M, N and K (a multiple of the block size) is right.
#version 450
#if defined(VARIANT_KHR_COOPMAT)
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;  // 4 subgroups of the device's size
#else
layout(local_size_x = 128) in;
const uint WG = 128;
#endif

layout(std430, binding = 0) readonly buffer Weights { uint wq[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform Push {
    uint M, N, K;    // rows of X, weight rows, columns
    uint row_bytes;  // bytes per weight row
    uint x_off;      // floats
    uint y_off;      // floats
    uint mode;       // 0: Y = X·Wᵀ, 1: Y += X·Wᵀ
} p;

#include "blocks.glsl"

const uint BM = 64, BN = 64, BK = 64;  // BK: two 32-element units per step

#if defined(VARIANT_KHR_COOPMAT)
shared float16_t As[BM * BK];  // [m][k]
shared float16_t Bs[BN * BK];  // [n][k]
shared float Cs[BM * BN];      // [m][n], the tile on its way out
#else
shared float As[BK * BM];  // [k][m]
shared float Bs[BK * BN];  // [k][n]
#endif

void main() {
    uint t = gl_LocalInvocationID.x;
    uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
    uint units = p.K / 32u + ((p.K & 31u) != 0u ? 1u : 0u);

#if defined(VARIANT_KHR_COOPMAT)
    uint sg = t / (WG / 4u);  // subgroup index 0..3 (WG is 4 subgroups)
    uint sm = (sg >> 1) * 32u, sn = (sg & 1u) * 32u;
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[2][2];
    for (uint i = 0; i < 2u; ++i)
        for (uint j = 0; j < 2u; ++j) acc[i][j] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
#else
    uint tn = t & 7u, tm = t >> 3;  // columns tn + 8j, rows tm + 16i
    float acc[4][8];
    for (uint i = 0; i < 4u; ++i)
        for (uint j = 0; j < 8u; ++j) acc[i][j] = 0.0;
#endif

    for (uint u0 = 0; u0 < units; u0 += 2u) {
        // Weight tile: 64 rows × 2 units = 128 unit decodes.
        for (uint d = t; d < BN * 2u; d += WG) {
            uint nn = d >> 1, uu = u0 + (d & 1u);
            uint row = min(n0 + nn, p.N - 1u);
            vec4 v[8];
            if (uu < units) {
                unit_values(row * p.row_bytes, uu, p.K, v);
            } else {
                for (uint i = 0; i < 8u; ++i) v[i] = vec4(0.0);
            }
            uint kb = (d & 1u) * 32u;
            for (uint e = 0; e < 32u; ++e) {
#if defined(VARIANT_KHR_COOPMAT)
                Bs[nn * BK + kb + e] = float16_t(v[e >> 2][e & 3u]);
#else
                Bs[(kb + e) * BN + nn] = v[e >> 2][e & 3u];
#endif
            }
        }
        // Activation tile: 64 rows × 64 columns, coalesced along k.
        for (uint i = t; i < BM * BK; i += WG) {
            uint mm = i / BK, kk = i % BK;
            uint m = m0 + mm, k = u0 * 32u + kk;
            float a = (m < p.M && k < p.K) ? x[p.x_off + m * p.K + k] : 0.0;
#if defined(VARIANT_KHR_COOPMAT)
            As[mm * BK + kk] = float16_t(a);
#else
            As[kk * BM + mm] = a;
#endif
        }
        barrier();
#if defined(VARIANT_KHR_COOPMAT)
        for (uint k = 0; k < BK; k += 16u) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ta[2];
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> tb[2];
            for (uint i = 0; i < 2u; ++i)
                coopMatLoad(ta[i], As, (sm + 16u * i) * BK + k, BK, gl_CooperativeMatrixLayoutRowMajor);
            for (uint j = 0; j < 2u; ++j)
                coopMatLoad(tb[j], Bs, (sn + 16u * j) * BK + k, BK, gl_CooperativeMatrixLayoutColumnMajor);
            for (uint i = 0; i < 2u; ++i)
                for (uint j = 0; j < 2u; ++j) acc[i][j] = coopMatMulAdd(ta[i], tb[j], acc[i][j]);
        }
#else
        for (uint k = 0; k < BK; ++k) {
            float a[4], b[8];
            for (uint i = 0; i < 4u; ++i) a[i] = As[k * BM + tm + 16u * i];
            for (uint j = 0; j < 8u; ++j) b[j] = Bs[k * BN + tn + 8u * j];
            for (uint i = 0; i < 4u; ++i)
                for (uint j = 0; j < 8u; ++j) acc[i][j] += a[i] * b[j];
        }
#endif
        barrier();
    }

#if defined(VARIANT_KHR_COOPMAT)
    for (uint i = 0; i < 2u; ++i)
        for (uint j = 0; j < 2u; ++j)
            coopMatStore(acc[i][j], Cs, (sm + 16u * i) * BN + sn + 16u * j, BN, gl_CooperativeMatrixLayoutRowMajor);
    barrier();
    for (uint i = t; i < BM * BN; i += WG) {
        uint m = m0 + i / BN, n = n0 + i % BN;
        if (m < p.M && n < p.N) {
            uint o = p.y_off + m * p.N + n;
            float v = Cs[i];
            if (p.mode == 1u) v += y[o];
            y[o] = v;
        }
    }
#else
    for (uint i = 0; i < 4u; ++i) {
        uint m = m0 + tm + 16u * i;
        if (m >= p.M) continue;
        for (uint j = 0; j < 8u; ++j) {
            uint n = n0 + tn + 8u * j;
            if (n >= p.N) continue;
            uint o = p.y_off + m * p.N + n;
            float v = acc[i][j];
            if (p.mode == 1u) v += y[o];
            y[o] = v;
        }
    }
#endif
}
