// Y = X·Wᵀ for a window of rows (prefill) on cooperative matrices: X is [M][K] activations as
// F16 (a copy made by f16_copy, rows of K halves), W is [N][K] in its GGUF block format
// (WTYPE_* define), Y is [M][N] F32 (row stride N), written or added to (mode 1: the residual
// stream). The tile of Y is 64 window rows × 128 weight rows over 8 subgroups in a 2×4 grid,
// each 32 × 32 as 2×2 accumulators of 16×16×16 products (F32). (Measured on an H200: 2 subgroups
// of 4×4 accumulators, or this tile without double buffering, ran slower.)
// The staging is double-buffered: while the subgroups multiply the tiles of step s, the weight
// tile of step s+1 is dequantized from its native blocks (two quads a thread per 16-byte chunk)
// and the F16 activations copied into the other buffer, so the global loads of one step overlap
// the products of the other and each step needs one barrier, not two. Staged rows are 4 chunks
// padded by one, so the threads of a quarter-warp store into different banks.
// Edges: rows past M and columns past K are zero; weight rows past N are clamped to N-1 (read,
// never stored). K must be a multiple of 8 (the launcher uses the F32 tiles otherwise). Full
// tiles load and store their accumulators straight from and to Y; edge tiles go through a
// per-subgroup 16×16 staging block with bounds.
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;  // 8 subgroups of the device's (fixed) size
// Speed report only (tests/vulkan/gemm_speed_test.cpp): 1 skips the weight dequantization, 2 the
// matrix products, so the report can tell which part bounds the tile. 0 in every real use.
layout(constant_id = 1) const uint ABLATE = 0;

layout(std430, binding = 0) readonly buffer Weights { uint wq[]; };
layout(std430, binding = 1) readonly buffer XH { uvec4 xh[]; };  // 8 halves a chunk
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform Push {
    uint M, N, K;    // rows of X, weight rows, columns
    uint row_bytes;  // bytes per weight row
    uint x_off;      // unused here (the F16 copy starts its view)
    uint y_off;      // floats
    uint mode;       // 0: Y = X·Wᵀ, 1: Y += X·Wᵀ
} p;

#include "blocks.glsl"

const uint BM = 64, BN = 128, BK = 32;
const uint LD4 = BK / 8u + 1u;  // chunks per staged row, one of padding
shared uvec4 As4[2u * BM * LD4];  // two buffers of [m][k]
shared uvec4 Bs4[2u * BN * LD4];  // two buffers of [n][k]
shared float Cs[8u * 256u];       // a 16×16 block per subgroup, for edge tiles

// Stages the 32 columns of unit u into buffer b.
void stage(uint u, uint b) {
    uint t = gl_LocalInvocationID.x;
    uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
    // Weight tile: 128 rows × 4 chunks; four consecutive threads share a unit of one row.
    for (uint i = t; i < BN * 4u; i += WG) {
        if (ABLATE == 1u) break;
        uint r = i >> 2, c = i & 3u;
        uint rb = w_row(min(n0 + r, p.N - 1u), p.row_bytes);
        vec4 qa = quad_values(rb, u, 2u * c, p.K), qb = quad_values(rb, u, 2u * c + 1u, p.K);
        Bs4[(b * BN + r) * LD4 + c] = uvec4(packHalf2x16(qa.xy), packHalf2x16(qa.zw),
                                            packHalf2x16(qb.xy), packHalf2x16(qb.zw));
    }
    // Activation tile: 64 rows × 4 chunks, copied.
    for (uint i = t; i < BM * 4u; i += WG) {
        uint r = i >> 2, c = i & 3u;
        uint m = m0 + r, k = u * 32u + 8u * c;
        As4[(b * BM + r) * LD4 + c] = (m < p.M && k < p.K) ? xh[(m * p.K + k) / 8u] : uvec4(0u);
    }
}

void main() {
    uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
    uint units = (p.K + 31u) / 32u;
    uint sg = gl_SubgroupID;
    uint sm = (sg >> 2) * 32u, sn = (sg & 3u) * 32u;
    // Direct loads and stores of Y need the whole tile inside and 16-byte aligned rows.
    bool full = m0 + BM <= p.M && n0 + BN <= p.N && (p.y_off & 3u) == 0u && (p.N & 3u) == 0u;

    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[2][2];
    for (uint i = 0; i < 2u; ++i)
        for (uint j = 0; j < 2u; ++j) {
            acc[i][j] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
            if (full && p.mode == 1u)
                coopMatLoad(acc[i][j], y, p.y_off + (m0 + sm + 16u * i) * p.N + n0 + sn + 16u * j,
                            p.N, gl_CooperativeMatrixLayoutRowMajor);
        }

    stage(0u, 0u);
    barrier();
    for (uint u = 0; u < units; ++u) {
        uint b = u & 1u;
        if (u + 1u < units) stage(u + 1u, b ^ 1u);
        for (uint k = 0; k < BK; k += 16u) {
            if (ABLATE == 2u) break;
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ta[2];
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> tb[2];
            for (uint i = 0; i < 2u; ++i)
                coopMatLoad(ta[i], As4, (b * BM + sm + 16u * i) * LD4 + k / 8u, LD4,
                            gl_CooperativeMatrixLayoutRowMajor);
            for (uint j = 0; j < 2u; ++j)
                coopMatLoad(tb[j], Bs4, (b * BN + sn + 16u * j) * LD4 + k / 8u, LD4,
                            gl_CooperativeMatrixLayoutColumnMajor);
            for (uint i = 0; i < 2u; ++i)
                for (uint j = 0; j < 2u; ++j) acc[i][j] = coopMatMulAdd(ta[i], tb[j], acc[i][j]);
        }
        barrier();  // buffer b is restaged at step u + 2, after every subgroup is done with it
    }

    if (full) {
        for (uint i = 0; i < 2u; ++i)
            for (uint j = 0; j < 2u; ++j)
                coopMatStore(acc[i][j], y, p.y_off + (m0 + sm + 16u * i) * p.N + n0 + sn + 16u * j,
                             p.N, gl_CooperativeMatrixLayoutRowMajor);
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
}
