// Y = X·Wᵀ for a window of rows (prefill), F32 FMA tiles for any device (the cooperative-matrix
// tiles are gemm_coopmat.comp): X is [M][K] F32 activations (row stride K), W is
// [N][K] in its GGUF block format (WTYPE_* define), Y is [M][N] F32 (row stride N), written or
// added to (mode 1: the residual stream). The weight tile is dequantized from its native blocks
// into shared memory once per tile and reused by every row of the window, which is what makes
// prefill compute-bound instead of re-reading every weight per row as the decode GEMV does.
// 64×64 tiles: 128 threads, each 4 rows × 8 columns. Staging is spread so neighbouring threads
// write neighbouring shared words: each thread decodes quads (4 consecutive weights).
// Edges: rows of X past M and columns past K read as 0; weight rows past N are clamped to N-1
// (read, never stored), so any M, N and K (a multiple of the block size) is right.
// Split over K (splits > 1, workgroup z the part; gemm_split.glsl): each part sums k_split
// columns into the split scratch and the last part of a tile to finish adds them in order.
#version 450
layout(local_size_x = 128) in;
const uint WG = 128;
const uint BM = 64, BN = 64;
const uint BK = 64;  // two 32-element units per step

layout(std430, binding = 0) readonly buffer Weights { uint wq[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(std430, binding = 3) coherent buffer SplitCounters { uint split_u[]; };
layout(std430, binding = 4) coherent buffer SplitParts { float split_f[]; };

layout(push_constant) uniform Push {
    uint M, N, K;    // rows of X, weight rows, columns
    uint row_bytes;  // bytes per weight row
    uint x_off;      // floats
    uint y_off;      // floats
    uint mode;       // 0: Y = X·Wᵀ, 1: Y += X·Wᵀ
    uint splits;     // parts of K (1: none)
    uint k_split;    // columns a part, a multiple of BK
} p;

#include "blocks.glsl"

shared float As[BK * BM];  // [k][m]
shared float Bs[BK * BN];  // [k][n]

// The split's flag in As (free after the main loop): the tiles fill 32 KiB, some devices' all.
#define SPLIT_FLAG_STORE(v) As[0] = (v) ? 1.0 : 0.0
#define SPLIT_FLAG_IS_SET() (As[0] != 0.0)
#include "gemm_split.glsl"

void main() {
    uint t = gl_LocalInvocationID.x;
    uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
    uint units = p.K / 32u + ((p.K & 31u) != 0u ? 1u : 0u);
    // This part's units (all of them unsplit).
    const uint u_begin = gl_WorkGroupID.z * (p.k_split / 32u);
    const uint u_end = p.splits > 1u ? min(units, u_begin + p.k_split / 32u) : units;

    uint tn = t & 7u, tm = t >> 3;  // columns tn + 8j, rows tm + 16i
    float acc[4][8];
    for (uint i = 0; i < 4u; ++i)
        for (uint j = 0; j < 8u; ++j) acc[i][j] = 0.0;

    for (uint u0 = u_begin; u0 < u_end; u0 += 2u) {
        // Weight tile: BN rows × 2 units × 8 quads; consecutive threads take consecutive quads.
        for (uint d = t; d < BN * 16u; d += WG) {
            uint nn = d >> 4, uu = u0 + ((d >> 3) & 1u), q = d & 7u;
            uint row = min(n0 + nn, p.N - 1u);
            vec4 v = uu < u_end ? quad_values(w_row(row, p.row_bytes), uu, q, p.K) : vec4(0.0);
            uint kk = (d & 15u) * 4u;
            Bs[kk * BN + nn] = v.x;
            Bs[(kk + 1u) * BN + nn] = v.y;
            Bs[(kk + 2u) * BN + nn] = v.z;
            Bs[(kk + 3u) * BN + nn] = v.w;
        }
        // Activation tile: BM rows × BK columns, four consecutive columns a thread.
        for (uint i = t; i < BM * BK / 4u; i += WG) {
            uint mm = i / (BK / 4u), kk = (i % (BK / 4u)) * 4u;
            uint m = m0 + mm, k = u0 * 32u + kk;
            vec4 a = vec4(0.0);
            if (m < p.M && k < u_end * 32u) {
                uint xb = p.x_off + m * p.K + k;
                if (k + 3u < p.K) {
                    a = vec4(x[xb], x[xb + 1u], x[xb + 2u], x[xb + 3u]);
                } else {
                    for (uint e = 0; e < 4u; ++e) a[e] = k + e < p.K ? x[xb + e] : 0.0;
                }
            }
            As[kk * BM + mm] = a.x;
            As[(kk + 1u) * BM + mm] = a.y;
            As[(kk + 2u) * BM + mm] = a.z;
            As[(kk + 3u) * BM + mm] = a.w;
        }
        barrier();
        for (uint k = 0; k < BK; ++k) {
            float a[4], b[8];
            for (uint i = 0; i < 4u; ++i) a[i] = As[k * BM + tm + 16u * i];
            for (uint j = 0; j < 8u; ++j) b[j] = Bs[k * BN + tn + 8u * j];
            for (uint i = 0; i < 4u; ++i)
                for (uint j = 0; j < 8u; ++j) acc[i][j] += a[i] * b[j];
        }
        barrier();
    }

    if (p.splits > 1u) {
        // This part's sums into the scratch ([window row][weight row] of the tile); the last
        // part to arrive reads every part's back, in part order.
        const uint tile = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
        for (uint i = 0; i < 4u; ++i)
            for (uint j = 0; j < 8u; ++j)
                split_f[split_part(tile, gl_WorkGroupID.z, BM * BN) + (tm + 16u * i) * BN + tn +
                        8u * j] = acc[i][j];
        if (!split_last(tile)) return;
        for (uint i = 0; i < 4u; ++i)
            for (uint j = 0; j < 8u; ++j) {
                float s = 0.0;
                for (uint z = 0; z < p.splits; ++z)
                    s += split_f[split_part(tile, z, BM * BN) + (tm + 16u * i) * BN + tn + 8u * j];
                acc[i][j] = s;
            }
    }
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
}
