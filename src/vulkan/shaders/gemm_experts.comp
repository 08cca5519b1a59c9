// The expert GEMMs of a mixture-of-experts layer over a prefill window, as grouped GEMM tiles:
// the window's (row, slot) pairs grouped by expert (moe_sort.comp wrote them at perm_off, and a
// table of tiles at tiles_off: word 0 the number of tiles, then for each tile its expert and the
// first and end positions of its pairs in that order, at most BM of them, all of one expert).
// Workgroup (x, y) computes weight rows x · BN .. of tile y: Y[pair][n] = W_e[n] · x_pair for
// each of the tile's pairs, e the tile's expert, W the stack of the layer's experts (expert_rows
// rows each, first_row the first read) in its GGUF block format (WTYPE_* define, the device's
// layout), x_pair the pair's row's input (x_per_slot 0: the gate and up projections read the
// window row's normed input) or its own (1: the down projection over the slot's SwiGLU output),
// both F32 rows of K values at x_off. Outputs go to the pair's place, y_off + pair · N.
//
// Why: the grouped batched GEMV (gemv_batch.comp, EXPERTS) reads an expert's weights once for
// each group of 8 of its pairs and multiplies on the shader cores; a 512-row window gives each
// of 256 experts about 16 pairs. Here each expert's weight tile is decoded once for up to BM of
// its pairs into shared memory, and (VARIANT_KHR_COOPMAT) multiplied on the matrix units in F16
// with F32 sums, as gemm_coopmat.comp does for a dense GEMM: 64 pairs × 128 weight rows over 8
// subgroups in a 2×4 grid, each 32 × 32 as 2×2 accumulators. The scalar variant (any device)
// stages F32 and sums in F32 FMAs, each of 256 threads 4 pairs × 8 weight rows.
// The tile table's length is known only on the device: the grid is its bound (one tile for
// each BM pairs and one more for each expert that may start one), and workgroups past the
// table's end leave at once. Pairs past a tile's end read zeros and store nothing; weight rows
// past N are clamped to N - 1 (read, never stored). K is a multiple of 32 (the launcher checks).
#version 450
#extension GL_EXT_control_flow_attributes : enable
#if defined(VARIANT_KHR_COOPMAT)
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;  // KHR: 8 subgroups of the device's (fixed) size

layout(std430, binding = 0) readonly buffer Weights { uint wq[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(std430, binding = 3) readonly buffer Route { uint route[]; };

layout(push_constant) uniform Push {
    uint K, N;       // columns, weight rows computed (of each expert)
    uint row_bytes;  // bytes per weight row
    uint x_off;      // floats
    uint y_off;      // floats
    uint k;          // experts a window row
    uint x_per_slot;
    uint expert_rows, first_row;
    uint perm_off, tiles_off;  // words of route
} p;

#include "blocks.glsl"

const uint BM = 64, BN = 128, BK = 32;

shared uint tile_pair[BM];  // the tile's pairs (past its end: none)
shared uint tile_x[BM];     // where each pair's input row starts, in floats

#if defined(VARIANT_KHR_COOPMAT)
const uint LD4 = BK / 8u + 1u;   // 16-byte chunks per staged row, one of padding
shared uvec4 As4[2u * BM * LD4];  // two buffers of [pair][k], 8 halves a chunk
shared uvec4 Bs4[2u * BN * LD4];  // two buffers of [weight row][k]
shared float Cs[8u * 256u];       // a 16×16 block per subgroup, for the scattered stores
#else
shared float As[BK * BM];  // [k][pair]
shared float Bs[BK * BN];  // [k][weight row]
#endif

// 8 values of input row i of the tile from column c (a multiple of 8), zeros past its pairs.
void x8(uint i, uint c, out vec4 lo, out vec4 hi) {
    lo = hi = vec4(0.0);
    if (tile_pair[i] == 0xffffffffu) return;
    uint o = tile_x[i] + c;
    if ((p.x_off & 3u) == 0u) {  // every row 16-byte aligned (K is a multiple of 32)
        lo = x4[o >> 2];
        hi = x4[(o >> 2) + 1u];
        return;
    }
    lo = vec4(x[o], x[o + 1u], x[o + 2u], x[o + 3u]);
    hi = vec4(x[o + 4u], x[o + 5u], x[o + 6u], x[o + 7u]);
}

#if defined(VARIANT_KHR_COOPMAT)
// Stages the 32 columns of unit u into buffer b: the weight tile decoded to halves (two quads a
// thread per 16-byte chunk), the pairs' inputs rounded to halves.
void stage(uint u, uint b, uint wbase, uint n0) {
    uint t = gl_LocalInvocationID.x;
    for (uint i = t; i < BN * 4u; i += WG) {
        uint r = i >> 2, c = i & 3u;
        uint rb = w_row(wbase + min(n0 + r, p.N - 1u), p.row_bytes);
        vec4 qa = quad_values(rb, u, 2u * c, p.K), qb = quad_values(rb, u, 2u * c + 1u, p.K);
        Bs4[(b * BN + r) * LD4 + c] = uvec4(packHalf2x16(qa.xy), packHalf2x16(qa.zw),
                                            packHalf2x16(qb.xy), packHalf2x16(qb.zw));
    }
    for (uint i = t; i < BM * 4u; i += WG) {
        uint r = i >> 2, c = i & 3u;
        vec4 lo, hi;
        x8(r, u * 32u + 8u * c, lo, hi);
        As4[(b * BM + r) * LD4 + c] = uvec4(packHalf2x16(lo.xy), packHalf2x16(lo.zw),
                                            packHalf2x16(hi.xy), packHalf2x16(hi.zw));
    }
}
#else
// Stages the 32 columns of unit u: the weight tile decoded (a quad a thread), the pairs' inputs.
void stage(uint u, uint wbase, uint n0) {
    uint t = gl_LocalInvocationID.x;
    for (uint d = t; d < BN * 8u; d += WG) {
        uint r = d >> 3, q = d & 7u;
        vec4 v = quad_values(w_row(wbase + min(n0 + r, p.N - 1u), p.row_bytes), u, q, p.K);
        [[unroll]] for (uint e = 0; e < 4u; ++e) Bs[(4u * q + e) * BN + r] = v[e];
    }
    for (uint i = t; i < BM * 4u; i += WG) {
        uint r = i >> 2, c = i & 3u;
        vec4 lo, hi;
        x8(r, u * 32u + 8u * c, lo, hi);
        [[unroll]] for (uint e = 0; e < 4u; ++e) {
            As[(8u * c + e) * BM + r] = lo[e];
            As[(8u * c + 4u + e) * BM + r] = hi[e];
        }
    }
}
#endif

// Y[pair][n] for the tile's pair i and weight row n (within bounds), y_off + pair · N + n.
void store(uint i, uint n, float v) {
    uint pr = tile_pair[i];
    if (pr != 0xffffffffu && n < p.N) y[p.y_off + pr * p.N + n] = v;
}

void main() {
    uint tile = gl_WorkGroupID.y;
    if (tile >= route[p.tiles_off]) return;  // past the table: the whole workgroup leaves
    uint e = route[p.tiles_off + 1u + 3u * tile];
    uint first = route[p.tiles_off + 2u + 3u * tile], end = route[p.tiles_off + 3u + 3u * tile];
    uint n0 = gl_WorkGroupID.x * BN;
    uint wbase = e * p.expert_rows + p.first_row;
    uint t = gl_LocalInvocationID.x;
    for (uint i = t; i < BM; i += WG) {
        uint at = first + i;
        uint pr = at < end ? route[p.perm_off + at] : 0xffffffffu;
        tile_pair[i] = pr;
        tile_x[i] = pr == 0xffffffffu ? 0u : p.x_off + (p.x_per_slot != 0u ? pr : pr / p.k) * p.K;
    }
    barrier();
    uint units = p.K / 32u;

#if defined(VARIANT_KHR_COOPMAT)
    uint sg = gl_SubgroupID;
    uint sm = (sg >> 2) * 32u, sn = (sg & 3u) * 32u;
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[2][2];
    for (uint i = 0; i < 2u; ++i)
        for (uint j = 0; j < 2u; ++j)
            acc[i][j] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    stage(0u, 0u, wbase, n0);
    barrier();
    for (uint u = 0; u < units; ++u) {
        uint b = u & 1u;
        if (u + 1u < units) stage(u + 1u, b ^ 1u, wbase, n0);
        for (uint kk = 0; kk < BK; kk += 16u) {
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ta[2];
            coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> tb[2];
            for (uint i = 0; i < 2u; ++i)
                coopMatLoad(ta[i], As4, (b * BM + sm + 16u * i) * LD4 + kk / 8u, LD4,
                            gl_CooperativeMatrixLayoutRowMajor);
            for (uint j = 0; j < 2u; ++j)
                coopMatLoad(tb[j], Bs4, (b * BN + sn + 16u * j) * LD4 + kk / 8u, LD4,
                            gl_CooperativeMatrixLayoutColumnMajor);
            for (uint i = 0; i < 2u; ++i)
                for (uint j = 0; j < 2u; ++j) acc[i][j] = coopMatMulAdd(ta[i], tb[j], acc[i][j]);
        }
        barrier();  // buffer b is restaged at step u + 2, after every subgroup is done with it
    }
    // The pairs' rows are scattered: every block goes through the subgroup's staging block.
    uint lane = gl_SubgroupInvocationID, lanes = gl_SubgroupSize;
    for (uint i = 0; i < 2u; ++i)
        for (uint j = 0; j < 2u; ++j) {
            coopMatStore(acc[i][j], Cs, sg * 256u, 16u, gl_CooperativeMatrixLayoutRowMajor);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            for (uint v = lane; v < 256u; v += lanes)
                store(sm + 16u * i + v / 16u, n0 + sn + 16u * j + v % 16u, Cs[sg * 256u + v]);
            subgroupBarrier();  // Cs is rewritten by the next block
        }
#else
    uint tn = t & 15u, tm = t >> 4;  // weight rows tn + 16j, pairs tm + 16i
    float acc[4][8];
    [[unroll]] for (uint i = 0; i < 4u; ++i)
        [[unroll]] for (uint j = 0; j < 8u; ++j) acc[i][j] = 0.0;
    for (uint u = 0; u < units; ++u) {
        stage(u, wbase, n0);
        barrier();
        for (uint kk = 0; kk < BK; ++kk) {
            float a[4], w[8];
            [[unroll]] for (uint i = 0; i < 4u; ++i) a[i] = As[kk * BM + tm + 16u * i];
            [[unroll]] for (uint j = 0; j < 8u; ++j) w[j] = Bs[kk * BN + tn + 16u * j];
            [[unroll]] for (uint i = 0; i < 4u; ++i)
                [[unroll]] for (uint j = 0; j < 8u; ++j) acc[i][j] += a[i] * w[j];
        }
        barrier();
    }
    [[unroll]] for (uint i = 0; i < 4u; ++i)
        [[unroll]] for (uint j = 0; j < 8u; ++j) store(tm + 16u * i, n0 + tn + 16u * j, acc[i][j]);
#endif
}
