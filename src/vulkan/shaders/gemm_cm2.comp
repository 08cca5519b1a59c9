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

#include "cm2_decode.glsl"

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
