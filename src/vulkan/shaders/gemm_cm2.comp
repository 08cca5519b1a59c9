// Y = X·Wᵀ for a window of rows (prefill) on NV cooperative matrix 2: workgroup-scope matrices
// whose tensor loads read W straight from its GGUF blocks through a decode function per format
// (WTYPE_* define), so the implementation stages and converts the tiles itself (it picks the
// shared-memory layout and the load pipeline; the decode runs once per element it stages).
// X is [M][K] F16 (the window's F16 copy made by f16_copy), W is [N][K] in its native blocks,
// Y is [M][N] F32 at y_off (row stride N), written or added to (mode 1: the residual stream).
// A workgroup computes a BM × BN tile of Yᵀ (BM weight rows × BN window rows) in steps of BK
// columns; the sizes are specialization constants so the launcher can fit them to the shape.
// A tile whose weight rows lie inside W, with K a whole number of unrolled steps, loads W
// through a layout without clamping in a loop unrolled over a block (twice the TFLOP/s of the
// clamped loop on an H200), X through one that clamps only where the tile passes M; edge tiles
// of W or K load through layouts that clamp loads past M, N or K to zero.
// Stores always clamp (drop what lies outside Y). The host keeps y_off a multiple of 4 (tensor
// bases are 16-byte aligned).
// SPLIT_K (the _split modules), split over K (workgroup z the part; gemm_split.glsl): each
// part multiplies k_split columns, stores its tile into the split scratch, and the last part of
// a tile to finish adds the parts in order (and Y, mode 1) and stores the tile. Only the split
// modules carry that second store path and the scratch's bindings: the tile that does not split
// compiles as it did before the split existed. Not with ACC_F16.
// ACC_F16 (the GEMM speed report's experiment only): the products are accumulated in F16 and
// converted to F32 at the end, half the accumulator registers.
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
layout(constant_id = 2) const uint BN = 128;  // window rows a tile
layout(constant_id = 3) const uint BK = 32;   // columns a step

#if defined(WTYPE_F16)
layout(std430, binding = 0) readonly buffer Weights { float16_t wq[]; };
#else
layout(std430, binding = 0) readonly buffer Weights { uint wq[]; };
#endif
layout(std430, binding = 1) readonly buffer XH { float16_t xh[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
#if defined(SPLIT_K)
layout(std430, binding = 3) coherent buffer SplitCounters { uint split_u[]; };
layout(std430, binding = 4) coherent buffer SplitParts { float split_f[]; };
#endif

layout(push_constant) uniform Push {
    uint M, N, K;    // rows of X, weight rows, columns
    uint row_bytes;  // bytes per weight row (implied by the layout's block stride)
    uint x_off;      // unused (the F16 copy starts its view)
    uint y_off;      // floats, a multiple of 4
    uint mode;       // 0: Y = X·Wᵀ, 1: Y += X·Wᵀ
    uint splits;     // parts of K (SPLIT_K)
    uint k_split;    // columns a part, a multiple of UNROLL · BK (SPLIT_K)
    uint x_rows;     // rows of X the loads may read (>= M; rows past M reach only Y's rows past M)
} p;

#if defined(SPLIT_K)
#include "gemm_split.glsl"
#endif

// A Q4_K / Q5_K value from its block's 16-byte head (f16 d, f16 dmin, 12 bytes of 6-bit scales
// and mins), its sub-block sb and its quant q: d·scale·q − dmin·min. Scale bytes 0-3 lie in h.y,
// 4-7 in h.z, 8-11 in h.w; sub-blocks 0-3 take the low 6 bits of bytes sb (scale) and 4 + sb
// (min), 4-7 the nibbles of byte 4 + sb with the top two bits of bytes sb - 4 and sb on top.
float16_t k4_value(uvec4 h, uint sb, uint q) {
    const vec2 dm = unpackHalf2x16(h.x);
    const uint s = (sb & 3u) * 8u, y = h.y >> s, z = h.z >> s, w = h.w >> s;
    const uint sc = sb < 4u ? y & 63u : (w & 15u) | ((y >> 2) & 48u);
    const uint mn = sb < 4u ? z & 63u : ((w >> 4) & 15u) | ((z >> 2) & 48u);
    return float16_t(dm.x * float(sc) * float(q) - dm.y * float(mn));
}

// The decode functions: a reference to one block, the element's block coordinates and its
// coordinates inside the block (row 0, column e). Values are formed in F32 and rounded once.
#if defined(WTYPE_F32)
const uint QK = 1;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Block { float v; };
float16_t decode(const in Block b, const in uint bc[2], const in uint ib[2]) { return float16_t(b.v); }
#elif defined(WTYPE_Q4_0)
// 18 bytes: f16 d, 16 bytes; element e < 16 is the low nibble of byte e, e >= 16 the high
// nibble of byte e - 16, minus 8.
const uint QK = 32;
layout(buffer_reference, std430, buffer_reference_align = 2) buffer Block { uint16_t h[9]; };
float16_t decode(const in Block b, const in uint bc[2], const in uint ib[2]) {
    uint e = ib[1], j = 2u + (e & 15u);
    uint q = (uint(b.h[j >> 1]) >> ((j & 1u) * 8u + (e >> 4) * 4u)) & 15u;
    return float16_t((float(q) - 8.0) * unpackHalf2x16(uint(b.h[0])).x);
}
#elif defined(WTYPE_Q8_0)
// 34 bytes: f16 d, 32 signed bytes.
const uint QK = 32;
layout(buffer_reference, std430, buffer_reference_align = 2) buffer Block { uint16_t h[17]; };
float16_t decode(const in Block b, const in uint bc[2], const in uint ib[2]) {
    uint j = 2u + ib[1];
    int q = int(uint(b.h[j >> 1]) << (24u - (j & 1u) * 8u)) >> 24;
    return float16_t(float(q) * unpackHalf2x16(uint(b.h[0])).x);
}
#elif defined(WTYPE_Q5_K)
// 176 bytes: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 32 bytes of fifth bits (bit sb
// of byte l belongs to element 32·sb + l), 128 bytes of nibbles. Sub-block sb = e / 32 takes
// the low (sb even) or high (sb odd) nibbles of the 32 bytes at 32·(sb/2); value = d·scale·q −
// dmin·min. The decode runs once per element, so it reads the 16-byte head in one vector load
// and the element's word of nibbles and of fifth bits in one more each: the load instructions,
// not the arithmetic, bound it.
const uint QK = 256;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Block { uvec4 head; uint q[40]; };
float16_t decode(const in Block b, const in uint bc[2], const in uint ib[2]) {
    const uint e = ib[1], sb = e >> 5, l = e & 31u;
    const uvec4 h = b.head;
    uint q = (b.q[8u + 8u * (sb >> 1) + (l >> 2)] >> ((l & 3u) * 8u + (sb & 1u) * 4u)) & 15u;
    q |= ((b.q[l >> 2] >> ((l & 3u) * 8u + sb)) & 1u) << 4;
    return k4_value(h, sb, q);
}
#elif defined(WTYPE_Q4_K) || defined(WTYPE_Q6_K)
// Q4_K and Q6_K rows are held in tiles (weight_layout.h, tiled_rows.glsl). The layout hands
// over where block bc[1] of row bc[0] would start in GGUF order (Block has the GGUF block's
// size); the matrix starts (bc[0] · nb + bc[1]) blocks before it, and the element's bytes are
// found from there.
#include "tiled_rows.glsl"
const uint QK = 256;
#if defined(WTYPE_Q4_K)
const uint BS = 144;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Block { uvec4 v[9]; };
#else
const uint BS = 210;
layout(buffer_reference, std430, buffer_reference_align = 2) buffer Block { uint16_t h[105]; };
#endif
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Quads { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint v[]; };
uvec2 matrix_start(const in Block b, const in uint bc[2]) {
    const uvec2 a = uvec2(b);
    const uint back = (bc[0] * (p.K / QK) + bc[1]) * BS;
    return uvec2(a.x - back, a.y - (a.x < back ? 1u : 0u));
}
uint byte_at(uvec2 m, uint j) { return (Words(m).v[j >> 2] >> ((j & 3u) * 8u)) & 0xffu; }
#if defined(WTYPE_Q4_K)
// 144 bytes: the head (f16 d, f16 dmin, 12 bytes of 6-bit scales and mins), 128 bytes of
// nibbles. Sub-block sb = e / 32 takes the low (sb even) or high (sb odd) nibbles of the 32
// bytes at 16 + 32·(sb/2). The head is one vector load, the element's word of nibbles one more.
float16_t decode(const in Block b, const in uint bc[2], const in uint ib[2]) {
    const uint e = ib[1], sb = e >> 5, l = e & 31u;
    const uvec2 m = matrix_start(b, bc);
    const uint r = tiled_row(bc[0], p.row_bytes);
    const uvec4 h = Quads(m).v[tiled_byte(r, bc[1], BS, 0u) >> 4];
    const uint w = Words(m).v[tiled_byte(r, bc[1], BS, 16u + 32u * (sb >> 1) + (l & ~3u)) >> 2];
    return k4_value(h, sb, (w >> ((l & 3u) * 8u + (sb & 1u) * 4u)) & 15u);
}
#else
// 210 bytes: 128 bytes of low nibbles ql, 64 bytes of 2-bit highs qh, 16 signed scales, f16 d.
// Element 128h + 32k + l is the low (k < 2) or high (k >= 2) nibble of ql[64h + 32(k&1) + l]
// with bits 2k..2k+1 of qh[32h + l] on top, minus 32, times d · scale[8h + 2k + l/16].
float16_t decode(const in Block b, const in uint bc[2], const in uint ib[2]) {
    const uvec2 m = matrix_start(b, bc);
    const uint r = tiled_row(bc[0], p.row_bytes), i = bc[1];
    uint e = ib[1], hh = e >> 7, k = (e >> 5) & 3u, l = e & 31u;
    uint lo = (byte_at(m, tiled_byte(r, i, BS, 64u * hh + 32u * (k & 1u) + l)) >> ((k >> 1) * 4u)) & 15u;
    uint hi = (byte_at(m, tiled_byte(r, i, BS, 128u + 32u * hh + l)) >> (2u * k)) & 3u;
    int sc = int(byte_at(m, tiled_byte(r, i, BS, 192u + 8u * hh + 2u * k + (l >> 4))) << 24) >> 24;
    const uint dj = tiled_byte(r, i, BS, 208u);
    float d = unpackHalf2x16(Words(m).v[dj >> 2] >> ((dj & 2u) * 8u)).x;
    return float16_t(float(int(lo | (hi << 4)) - 32) * d * float(sc));
}
#endif
#endif

#if defined(ACC_F16)
#define ACC_T float16_t
#else
#define ACC_T float
#endif
#if defined(WTYPE_F16)
const uint QK = 1;
#endif
// Steps of the in-bounds loop unrolled together: a whole 256-element block for the k-quants,
// else 8, so the implementation can overlap one step's loads with the previous step's products.
const uint UNROLL = QK == 256u ? 256u / BK : 8u;

// One step: the BK columns from k of W and X through the layouts lw and lx (clamped or not, two
// different types, hence a macro) multiplied into acc.
#if defined(WTYPE_F16)
#define LOAD_W(a, lw, k) coopMatLoadTensorNV(a, wq, 0, sliceTensorLayoutNV(lw, n0, BM, k, BK))
#else
#define LOAD_W(a, lw, k) \
    coopMatLoadTensorNV(a, wq, 0, sliceTensorLayoutNV(lw, n0, BM, k, BK), decode)
#endif
#define STEP(lw, lx, k)                                                          \
    {                                                                            \
        coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> a;          \
        coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> b;          \
        LOAD_W(a, lw, k);                                                        \
        coopMatLoadTensorNV(b, xh, 0, sliceTensorLayoutNV(lx, m0, BN, k, BK), tr); \
        acc = coopMatMulAdd(a, b, acc);                                          \
    }

// This part's columns in whole unrolled steps (K a multiple of UNROLL · BK).
#define STEPS_UNROLLED(lw, lx)                                       \
    for (uint k0 = k_begin; k0 < k_end; k0 += UNROLL * BK) {         \
        [[unroll]] for (uint j = 0; j < UNROLL; ++j) {               \
            const uint k = k0 + j * BK;                              \
            STEP(lw, lx, k)                                          \
        }                                                            \
    }
void main() {
    const uint n0 = gl_WorkGroupID.x * BM, m0 = gl_WorkGroupID.y * BN;
#if defined(SPLIT_K)
    const uint k_begin = gl_WorkGroupID.z * p.k_split;  // this part's columns
    const uint k_end = min(p.K, k_begin + p.k_split);
#else
    const uint k_begin = 0u, k_end = p.K;
#endif

    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> ly =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    ly = setTensorLayoutDimensionNV(ly, p.M, p.N);
    // X and Y are row-major by window row; the tile is by weight row: read and write transposed.
    tensorViewNV<2, false, 1, 0> tr = createTensorViewNV(2, false, 1, 0);

    coopmat<ACC_T, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc =
        coopmat<ACC_T, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0.0);
#if !defined(ACC_F16) && !defined(SPLIT_K)
    if (p.mode == 1u)
        coopMatLoadTensorNV(acc, y, p.y_off, sliceTensorLayoutNV(ly, m0, BN, n0, BM), tr);
#endif

    if (n0 + BM <= p.N && p.K % (UNROLL * BK) == 0u) {
        // The tile's weight rows lie inside W and K is whole unrolled steps: W's loads need no
        // clamping (a layout without a clamp mode, the row stride spelled out); X's need none
        // either where the tile's window rows lie inside the rows X's buffer holds (its stride
        // a multiple of 8 halves, so its rows stay 16-byte aligned: rows past M multiply into
        // Y's rows past M only, which the store drops), else its layout clamps the rows past M
        // to zero. Clamping W as well (the edge tiles below) cost a window of 164 rows 80 ms of
        // GEMMs on an H100 against 99 ms for 2048 rows; clamping X alone, 53 ms.
        tensorLayoutNV<2> lw = createTensorLayoutNV(2);
#if !defined(WTYPE_F16)
        lw = setTensorLayoutBlockSizeNV(lw, 1, QK);
#endif
        lw = setTensorLayoutDimensionNV(lw, p.N, p.K);
        lw = setTensorLayoutStrideNV(lw, QK == 1u ? p.K & ~7u : p.K / QK, 1);
        if (m0 + BN <= p.x_rows) {
            tensorLayoutNV<2> lx = createTensorLayoutNV(2);
            lx = setTensorLayoutDimensionNV(lx, p.x_rows, p.K);
            lx = setTensorLayoutStrideNV(lx, p.K & ~7u, 1);
            STEPS_UNROLLED(lw, lx)
        } else {
            tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lx =
                createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
            lx = setTensorLayoutDimensionNV(lx, p.M, p.K);
            STEPS_UNROLLED(lw, lx)
        }
    } else {
        // Edge tiles of W or of K: the tensor layouts clamp loads past M, N or K to zero.
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lw =
            createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
#if !defined(WTYPE_F16)
        lw = setTensorLayoutBlockSizeNV(lw, 1, QK);
#endif
        lw = setTensorLayoutDimensionNV(lw, p.N, p.K);
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lx =
            createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
        lx = setTensorLayoutDimensionNV(lx, p.M, p.K);
        for (uint k = k_begin; k < k_end; k += BK) STEP(lw, lx, k)
    }
#if defined(ACC_F16)
    coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> res =
        coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(acc);
    if (p.mode == 1u) {
        coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> y0;
        coopMatLoadTensorNV(y0, y, p.y_off, sliceTensorLayoutNV(ly, m0, BN, n0, BM), tr);
        res = res + y0;
    }
    coopMatStoreTensorNV(res, y, p.y_off, sliceTensorLayoutNV(ly, m0, BN, n0, BM), tr);
#elif defined(SPLIT_K)
    {
        // This part's tile, [weight row][window row], into the scratch; the last part to arrive
        // reads every part's back in part order and stores the tile's rows inside Y.
        const uint tile = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
        tensorLayoutNV<2> lp = createTensorLayoutNV(2);
        lp = setTensorLayoutDimensionNV(lp, BM, BN);
        coopMatStoreTensorNV(acc, split_f, split_part(tile, gl_WorkGroupID.z, BM * BN),
                             sliceTensorLayoutNV(lp, 0, BM, 0, BN));
        if (!split_last(tile)) return;
        for (uint e = gl_LocalInvocationIndex; e < BM * BN; e += WG) {
            const uint n = n0 + e / BN, m = m0 + e % BN;
            if (n >= p.N || m >= p.M) continue;
            float s = 0.0;
            for (uint z = 0; z < p.splits; ++z) s += split_f[split_part(tile, z, BM * BN) + e];
            const uint o = p.y_off + m * p.N + n;
            if (p.mode == 1u) s += y[o];
            y[o] = s;
        }
    }
#else
    coopMatStoreTensorNV(acc, y, p.y_off, sliceTensorLayoutNV(ly, m0, BN, n0, BM), tr);
#endif
}
