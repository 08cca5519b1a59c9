// The expert GEMMs of a window in the experts' order, on NV cooperative matrix 2: the (row, slot)
// pairs grouped by expert (moe_sort.comp: its table of tiles at tiles_off, each tile an expert
// and the first and end positions of its pairs, at most BN of them), their inputs already
// gathered in that order as F16 rows (moe_gather.comp, or the SwiGLU's F16 copy of the
// experts' own outputs), and each pair's output written at its position in that order:
// Y[pos][n] = W_e[n] · X[pos] for the tile's positions, e its expert. W is the layer's stack of
// experts (expert_rows rows each, first_row the first read): F16 rows (WTYPE_F16: the stack
// expanded for the window, Kernels::dequant_f16), or Q4_K or Q6_K rows held in tiles of 32
// (weight_layout.h) decoded by the tensor loads as the dense tiles decode them (cm2_decode.glsl;
// on an H100 2-3x slower than over F16: the decode bounds them). Workgroup (x, y) computes
// weight rows x · BM .. of table tile y.
// Why this form: with X and Y contiguous in the experts' order, a tile reads X and writes Y
// through plain tensor loads and stores, as a dense window's GEMM does; gathering X through a
// decode function and storing each product to its pair's slot element by element left the
// matrix units idle (15-26 TFLOP/s on an H200, below the skinny grouped form's 37-58).
// The loads of X past a tile's end read the next rows of the buffer (the next expert's, or
// rows the host keeps allocated past the pairs): they reach only Y's rows past the tile's end,
// which the store drops. K is a multiple of 256, N of BM (the launcher checks).
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
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint BM = 128;  // weight rows a tile
layout(constant_id = 2) const uint BN = 64;   // pairs a tile: the table's tiles hold up to BN
layout(constant_id = 3) const uint BK = 32;   // columns a step

#if defined(WTYPE_F16)
layout(std430, binding = 0) readonly buffer Weights { float16_t wq[]; };
const uint QK = 1;
#else
layout(std430, binding = 0) readonly buffer Weights { uint wq[]; };
#endif
layout(std430, binding = 1) readonly buffer XH { float16_t xh[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(std430, binding = 3) readonly buffer Route { uint route[]; };

layout(push_constant) uniform Push {
    uint K, N;         // columns, weight rows computed (of each expert)
    uint row_bytes;    // bytes a weight row
    uint x_off;        // halves: position 0's input row in XH, 16-byte aligned
    uint x_rows;       // rows XH holds from x_off (>= every tile's first + BN)
    uint y_off;        // floats: position 0's output row in Y, a multiple of 4
    uint expert_rows;  // rows an expert holds in the stack, a multiple of 32
    uint first_row;    // the first of them read, a multiple of 32
    uint tiles_off;    // words of route
} p;

#if !defined(WTYPE_F16)
#include "cm2_decode.glsl"
#endif

const uint UNROLL = 256u / BK;  // the steps of one block of columns, unrolled together

void main() {
    const uint n0 = gl_WorkGroupID.x * BM, y_tile = gl_WorkGroupID.y;
    if (y_tile >= route[p.tiles_off]) return;  // past the table: the whole workgroup leaves
    const uint expert = route[p.tiles_off + 1u + 3u * y_tile];
    const uint first = route[p.tiles_off + 2u + 3u * y_tile];
    const uint end = route[p.tiles_off + 3u + 3u * y_tile];
    // The expert's rows are rows of the whole stack (one matrix of n_expert · expert_rows rows,
    // in tiles of 32 rows for the K-quants): every load starts at element 0 of the buffer and
    // slices the stack's rows. Strides and offsets are masked to the alignment the launcher
    // checks (8 halves, 4 floats): NV's compiler takes the tensor loads' wide, fast path only
    // where it can prove them 16-byte aligned (with the expert's base as a runtime offset these
    // tiles ran at 16-35 TFLOP/s on an H100).
    const uint w_row = expert * p.expert_rows + p.first_row + n0;
    const uint kw = p.K & ~255u, x_off = p.x_off & ~7u, y_off = p.y_off & ~3u;

    tensorLayoutNV<2> lw = createTensorLayoutNV(2);
#if !defined(WTYPE_F16)
    lw = setTensorLayoutBlockSizeNV(lw, 1, QK);
#endif
    lw = setTensorLayoutDimensionNV(lw, w_row + BM, kw);
    lw = setTensorLayoutStrideNV(lw, kw / QK, 1);
    tensorLayoutNV<2> lx = createTensorLayoutNV(2);
    lx = setTensorLayoutDimensionNV(lx, p.x_rows, kw);
    lx = setTensorLayoutStrideNV(lx, kw, 1);
    // X and Y are row-major by position; the tile is by weight row: read and write transposed.
    tensorViewNV<2, false, 1, 0> tr = createTensorViewNV(2, false, 1, 0);

    coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc =
        coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
    for (uint k0 = 0u; k0 < kw; k0 += 256u) {
        [[unroll]] for (uint j = 0u; j < UNROLL; ++j) {
            const uint k = k0 + j * BK;
            coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> a;
            coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> b;
#if defined(WTYPE_F16)
            coopMatLoadTensorNV(a, wq, 0, sliceTensorLayoutNV(lw, w_row, BM, k, BK));
#else
            coopMatLoadTensorNV(a, wq, 0, sliceTensorLayoutNV(lw, w_row, BM, k, BK), decode);
#endif
            coopMatLoadTensorNV(b, xh, x_off, sliceTensorLayoutNV(lx, first, BN, k, BK), tr);
            acc = coopMatMulAdd(a, b, acc);
        }
    }
    // Rows past the tile's end (the layout's rows) are dropped.
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> ly =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    ly = setTensorLayoutDimensionNV(ly, end, p.N & ~127u);
    coopMatStoreTensorNV(acc, y, y_off, sliceTensorLayoutNV(ly, first, BN, n0, BM), tr);
}
