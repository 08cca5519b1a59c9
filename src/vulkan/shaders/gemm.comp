// Y = X·Wᵀ for a window of rows (prefill): X is [M][K] F32 activations (row stride K), W is
// [N][K] in its GGUF block format (WTYPE_* define), Y is [M][N] F32 (row stride N), written or
// added to (mode 1: the residual stream). The weight tile is dequantized from its native blocks
// into shared memory once per tile and reused by every row of the window, which is what makes
// prefill compute-bound instead of re-reading every weight per row as the decode GEMV does.
//   VARIANT_SCALAR       64×64 tiles of F32 FMAs: 128 threads, each 4 rows × 8 columns; any device.
//   VARIANT_KHR_COOPMAT  64×128 tiles (64 window rows × 128 weight rows) staged as F16 and
//                        multiplied by 16×16×16 cooperative matrices with F32 accumulators:
//                        8 subgroups in a 2×4 grid, each a 32×32 block (2×2 accumulators).
// Staging is spread so neighbouring threads write neighbouring shared words: each thread decodes
// quads (4 consecutive weights) rather than whole 32-weight units, and the shared rows are padded
// by 8 halves so rows start in different banks. Full tiles load and store their accumulators
// straight from and to Y; edge tiles go through a per-subgroup 16×16 staging block with bounds.
// Edges: rows of X past M and columns past K read as 0; weight rows past N are clamped to N-1
// (read, never stored), so any M, N and K (a multiple of the block size) is right.
#version 450
#if defined(VARIANT_KHR_COOPMAT)
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;  // 8 subgroups of the device's (fixed) size
// Speed report only (tests/vulkan/gemm_speed_test.cpp): 1 skips the weight dequantization, 2 the
// matrix products, so the report can tell which part bounds the tile. 0 in every real use.
layout(constant_id = 1) const uint ABLATE = 0;
const uint BM = 64, BN = 128;
#else
layout(local_size_x = 128) in;
const uint WG = 128;
const uint BM = 64, BN = 64;
#endif
const uint BK = 64;  // two 32-element units per step

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

#if defined(VARIANT_KHR_COOPMAT)
const uint LD = BK + 8u;  // padded row stride of the staged tiles, in halves
shared float16_t As[BM * LD];  // [m][k]
shared float16_t Bs[BN * LD];  // [n][k]
shared float Cs[8u * 256u];    // a 16×16 block per subgroup, for edge tiles
#else
shared float As[BK * BM];  // [k][m]
shared float Bs[BK * BN];  // [k][n]
#endif

void main() {
    uint t = gl_LocalInvocationID.x;
    uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
    uint units = p.K / 32u + ((p.K & 31u) != 0u ? 1u : 0u);

#if defined(VARIANT_KHR_COOPMAT)
    uint sg = gl_SubgroupID;
    uint sm = (sg >> 2) * 32u, sn = (sg & 3u) * 32u;
    // Direct loads and stores of Y need the whole tile inside and 16-byte aligned rows.
    bool full = m0 + BM <= p.M && n0 + BN <= p.N && (p.y_off & 3u) == 0u && (p.N & 3u) == 0u;
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[2][2];
    for (uint i = 0; i < 2u; ++i)
        for (uint j = 0; j < 2u; ++j) {
            acc[i][j] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
            if (full && p.mode == 1u)
                coopMatLoad(acc[i][j], y, p.y_off + (m0 + sm + 16u * i) * p.N + n0 + sn + 16u * j, p.N,
                            gl_CooperativeMatrixLayoutRowMajor);
        }
#else
    uint tn = t & 7u, tm = t >> 3;  // columns tn + 8j, rows tm + 16i
    float acc[4][8];
    for (uint i = 0; i < 4u; ++i)
        for (uint j = 0; j < 8u; ++j) acc[i][j] = 0.0;
#endif

    for (uint u0 = 0; u0 < units; u0 += 2u) {
        // Weight tile: BN rows × 2 units × 8 quads; consecutive threads take consecutive quads.
        for (uint d = t; d < BN * 16u; d += WG) {
#if defined(VARIANT_KHR_COOPMAT)
            if (ABLATE == 1u) break;
#endif
            uint nn = d >> 4, uu = u0 + ((d >> 3) & 1u), q = d & 7u;
            uint row = min(n0 + nn, p.N - 1u);
            vec4 v = uu < units ? quad_values(row * p.row_bytes, uu, q, p.K) : vec4(0.0);
            uint kk = (d & 15u) * 4u;
#if defined(VARIANT_KHR_COOPMAT)
            uint o = nn * LD + kk;
            Bs[o] = float16_t(v.x);
            Bs[o + 1u] = float16_t(v.y);
            Bs[o + 2u] = float16_t(v.z);
            Bs[o + 3u] = float16_t(v.w);
#else
            Bs[kk * BN + nn] = v.x;
            Bs[(kk + 1u) * BN + nn] = v.y;
            Bs[(kk + 2u) * BN + nn] = v.z;
            Bs[(kk + 3u) * BN + nn] = v.w;
#endif
        }
        // Activation tile: BM rows × BK columns, four consecutive columns a thread.
        for (uint i = t; i < BM * BK / 4u; i += WG) {
            uint mm = i / (BK / 4u), kk = (i % (BK / 4u)) * 4u;
            uint m = m0 + mm, k = u0 * 32u + kk;
            vec4 a = vec4(0.0);
            if (m < p.M) {
                uint xb = p.x_off + m * p.K + k;
                if (k + 3u < p.K) {
                    a = vec4(x[xb], x[xb + 1u], x[xb + 2u], x[xb + 3u]);
                } else {
                    for (uint e = 0; e < 4u; ++e) a[e] = k + e < p.K ? x[xb + e] : 0.0;
                }
            }
#if defined(VARIANT_KHR_COOPMAT)
            uint o = mm * LD + kk;
            As[o] = float16_t(a.x);
            As[o + 1u] = float16_t(a.y);
            As[o + 2u] = float16_t(a.z);
            As[o + 3u] = float16_t(a.w);
#else
            As[kk * BM + mm] = a.x;
            As[(kk + 1u) * BM + mm] = a.y;
            As[(kk + 2u) * BM + mm] = a.z;
            As[(kk + 3u) * BM + mm] = a.w;
#endif
        }
        barrier();
#if defined(VARIANT_KHR_COOPMAT)
        for (uint k = 0; k < BK; k += 16u) {
            if (ABLATE == 2u) break;
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ta[2];
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> tb[2];
            for (uint i = 0; i < 2u; ++i)
                coopMatLoad(ta[i], As, (sm + 16u * i) * LD + k, LD, gl_CooperativeMatrixLayoutRowMajor);
            for (uint j = 0; j < 2u; ++j)
                coopMatLoad(tb[j], Bs, (sn + 16u * j) * LD + k, LD, gl_CooperativeMatrixLayoutColumnMajor);
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
    if (full) {
        for (uint i = 0; i < 2u; ++i)
            for (uint j = 0; j < 2u; ++j)
                coopMatStore(acc[i][j], y, p.y_off + (m0 + sm + 16u * i) * p.N + n0 + sn + 16u * j, p.N,
                             gl_CooperativeMatrixLayoutRowMajor);
        return;
    }
    uint lane = gl_SubgroupInvocationID, lanes = gl_SubgroupSize;
    for (uint i = 0; i < 2u; ++i)
        for (uint j = 0; j < 2u; ++j) {
            coopMatStore(acc[i][j], Cs, sg * 256u, 16u, gl_CooperativeMatrixLayoutRowMajor);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            for (uint e = lane; e < 256u; e += lanes) {
                uint m = m0 + sm + 16u * i + e / 16u, n = n0 + sn + 16u * j + e % 16u;
                if (m < p.M && n < p.N) {
                    uint o = p.y_off + m * p.N + n;
                    float v = Cs[sg * 256u + e];
                    if (p.mode == 1u) v += y[o];
                    y[o] = v;
                }
            }
            subgroupBarrier();  // Cs is rewritten by the next block
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
