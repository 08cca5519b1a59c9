// The expert GEMMs of a window as grouped tiles (gemm_experts.comp's contract: the pairs grouped
// by expert at perm_off, the table of tiles at tiles_off, each pair's slot of Y written from its
// F32 input row) on NV cooperative matrix 2, for Q4_K and Q6_K stacks whose experts are whole
// tiles of rows (weight_layout.h). Workgroup (x, y) computes weight rows x · BM .. of table
// tile y: the expert's matrix starts the tensor loads of W, which decode its blocks as the
// dense tiles do (cm2_decode.glsl); X's loads gather the tile's pairs' rows through a decode
// function of their own (each element converted to a half as staged), and the products leave
// through a per-element function that writes each pair's slot. So a tile of weights is decoded
// once for up to BN pairs and multiplied on the matrix units in workgroup-scope tiles, as a dense
// window's GEMM is (the skinny GEMM's grouped form stages both by hand, four subgroups apart).
// K is a multiple of 256 (whole blocks: the loads need no clamping in K).
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference_uvec2 : require
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint BM = 64;  // weight rows a tile
layout(constant_id = 2) const uint BN = 64;  // pairs a tile: the table's tiles hold up to 64
layout(constant_id = 3) const uint BK = 32;  // columns a step

layout(std430, binding = 0) readonly buffer Weights { uint wq[]; };
layout(std430, binding = 1) readonly buffer X { float xf[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(std430, binding = 3) readonly buffer Route { uint route[]; };

// (gemm_experts.comp's push constants.)
layout(push_constant) uniform Push {
    uint K, N;         // columns, weight rows computed (of each expert)
    uint row_bytes;    // bytes a weight row
    uint x_off;        // floats
    uint y_off;        // floats
    uint k;            // experts a window row
    uint x_per_slot;   // 1: each pair reads its own row of x
    uint expert_rows;  // rows an expert holds in the stack, a multiple of 32
    uint first_row;    // the first of them read, a multiple of 32
    uint perm_off, tiles_off;  // words of route
} p;

#include "cm2_decode.glsl"

const uint kNone = 0xffffffffu;
shared uint tile_pair[BN];  // the tile's pairs (past its end: none)
shared uint tile_x[BN];     // where each pair's input row starts, in floats

// X's tile as the tensor [K][pairs]: element (column c, pair j) from pair j's input row. The
// layout clamps pairs past the tile's end to zero before this is called.
layout(buffer_reference, std430, buffer_reference_align = 4) buffer XValue { float v; };
float16_t gather_x(const in XValue unused, const in uint bc[2], const in uint ib[2]) {
    return float16_t(xf[tile_x[bc[1]] + bc[0]]);
}

// Element (weight row r, pair j) of the tile's products into the pair's slot of Y.
float store_slot(const in uint r, const in uint j, const in float v, const in uint n0) {
    const uint pr = tile_pair[j];
    if (pr != kNone && n0 + r < p.N) y[p.y_off + pr * p.N + n0 + r] = v;
    return v;
}

const uint UNROLL = 256u / BK;  // the steps of one block of columns, unrolled together

#define STEP(lw, k)                                                                      \
    {                                                                                    \
        coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> a;                  \
        coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> b;                  \
        coopMatLoadTensorNV(a, wq, w_base, sliceTensorLayoutNV(lw, n0, BM, k, BK), decode); \
        coopMatLoadTensorNV(b, xf, 0, sliceTensorLayoutNV(lx, k, BK, 0, BN), gather_x);  \
        acc = coopMatMulAdd(a, b, acc);                                                  \
    }

void main() {
    const uint n0 = gl_WorkGroupID.x * BM, y_tile = gl_WorkGroupID.y;
    if (y_tile >= route[p.tiles_off]) return;  // past the table: the whole workgroup leaves
    const uint expert = route[p.tiles_off + 1u + 3u * y_tile];
    const uint first = route[p.tiles_off + 2u + 3u * y_tile];
    const uint count = min(route[p.tiles_off + 3u + 3u * y_tile] - first, BN);
    for (uint i = gl_LocalInvocationIndex; i < BN; i += WG) {
        const uint pr = i < count ? route[p.perm_off + first + i] : kNone;
        tile_pair[i] = pr;
        tile_x[i] = pr == kNone ? 0u : p.x_off + (p.x_per_slot != 0u ? pr : pr / p.k) * p.K;
    }
    barrier();
    // The expert's matrix, in words: whole tiles of 32 rows (32 · row_bytes bytes each) before
    // its first row read.
    const uint w_base = ((expert * p.expert_rows + p.first_row) / 32u) * (8u * p.row_bytes);

    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lx =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    lx = setTensorLayoutBlockSizeNV(lx, 1, 1);
    lx = setTensorLayoutDimensionNV(lx, p.K, count);

    coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
    if (n0 + BM <= p.N) {
        // The tile's weight rows lie inside the expert's: W's loads need no clamping.
        tensorLayoutNV<2> lw = createTensorLayoutNV(2);
        lw = setTensorLayoutBlockSizeNV(lw, 1, QK);
        lw = setTensorLayoutDimensionNV(lw, p.N, p.K);
        lw = setTensorLayoutStrideNV(lw, p.K / QK, 1);
        for (uint k0 = 0u; k0 < p.K; k0 += 256u) {
            [[unroll]] for (uint j = 0u; j < UNROLL; ++j) {
                const uint k = k0 + j * BK;
                STEP(lw, k)
            }
        }
    } else {
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lw =
            createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
        lw = setTensorLayoutBlockSizeNV(lw, 1, QK);
        lw = setTensorLayoutDimensionNV(lw, p.N, p.K);
        for (uint k = 0u; k < p.K; k += BK) STEP(lw, k)
    }
    coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> stored;
    coopMatPerElementNV(stored, acc, store_slot, n0);
}
