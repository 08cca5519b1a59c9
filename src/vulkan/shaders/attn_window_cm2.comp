// Causal attention for a window of query rows (prefill) on NV cooperative matrix 2: the flash
// attention of attn_window.comp with the two products of every key tile (scores Q·Kᵀ and the
// weighted values P·V) on the tensor cores, and the online softmax on workgroup-scope matrices
// (row reductions and per-element operations), so nothing is staged by hand.
//
// A workgroup takes BR query vectors: BR / g window rows times g query heads that share one
// key/value head (g = p.group), vector q being row r0 + q / g, head h0 + q % g. It walks the keys
// the last of its rows can see in tiles of BC:
//   S  = Q·Kᵀ (the queries pre-scaled by 1/sqrt(head_dim)), masked to -inf past each row's
//        position (the causal mask) and past the keys the window has written;
//   M' = max(M, rowmax S), P = exp(S - M'), α = exp(M - M'), L = α·L + rowsum P;
//   O  = α·O + P·V, with P rounded to F16 for the product.
// M, L and α are kept as BR × BC matrices whose rows hold one value; α and the final L are
// widened to BR × HD by a row reduction (max over equal values) to scale O. Key 0 is visible to
// every row, so M is finite from the first tile on and a fully masked later tile adds exp(-inf)
// = 0. The epilogue divides by L and, when gate_off is given, multiplies by sigmoid(gate).
//
// Layouts (floats of act unless said): prepared queries [n][n_head][HD] at q_off; the output
// head h of row r at o_off + r·o_row + h·HD; the gate at gate_off + r·gate_row + h·gate_stride;
// the caches F16 pool rows [n_kv][HD] (kv_pages.glsl). Tensor layouts clamp: query rows past the window load as
// zero and their outputs are dropped, cache rows past the written keys load as zero (so unwritten
// rows, possibly NaN, never reach a product). Bases are 16-byte aligned (the launcher checks).
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint HD = 128;  // head_dim, a multiple of 32
layout(constant_id = 2) const uint BR = 64;   // query vectors a workgroup
layout(constant_id = 3) const uint BC = 64;   // keys a tile
// 1: tiles whose keys are all written load them without clamping, and tiles every row sees
// whole skip the causal mask (AttentionKernels' Tuning::attention_cm2_unclamped).
layout(constant_id = 4) const uint UNCLAMPED_INNER = 0;

layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) readonly buffer KCache { float16_t kc[]; };
layout(std430, binding = 2) readonly buffer VCache { float16_t vc[]; };
layout(std430, binding = 3) readonly buffer Tok { uint tok[]; };
#include "kv_pages.glsl"

layout(push_constant) uniform Push {
    uint n_head, n_kv, n_rows;
    uint group;  // query heads a workgroup (divides BR and n_head / n_kv)
    uint q_off;
    uint o_off, o_row;
    uint gate_off, gate_stride, gate_row;
    float scale;  // 1/sqrt(head_dim)
} p;

const float NEG_INF = -1.0 / 0.0;

#define ACC(R, C) coopmat<float, gl_ScopeWorkgroup, R, C, gl_MatrixUseAccumulator>

float max_op(const in float a, const in float b) { return max(a, b); }
float add_op(const in float a, const in float b) { return a + b; }

// Score (r, c) of the tile at key kb: query vector r is at position qpos0 + r / group; keys past
// it or past the written ones are masked.
float causal(const in uint r, const in uint c, const in float s, const in uint qpos0,
             const in uint kb, const in uint n_keys, const in uint group) {
    uint key = kb + c;
    return key <= qpos0 + r / group && key < n_keys ? s : NEG_INF;
}
float new_max(const in uint r, const in uint c, const in float m, const in float rowmax) {
    return max(m, rowmax);
}
float exp_diff(const in uint r, const in uint c, const in float a, const in float b) {
    return exp(a - b);
}
float gated(const in uint r, const in uint c, const in float o, const in float g) {
    return o / (1.0 + exp(-g));
}

void main() {
    const uint g = p.group, rows = BR / g;
    const uint h0 = gl_WorkGroupID.x * g, r0 = gl_WorkGroupID.y * rows;
    const uint kvh = h0 / (p.n_head / p.n_kv);
    const uint pos0 = tok[0];
    const uint n_keys = pos0 + min(r0 + rows, p.n_rows);  // keys the last live row sees

    // Query vectors (rows r0.., heads h0..h0+g-1) as a BR × HD slice of [n][n_head][HD].
    tensorLayoutNV<3, gl_CooperativeMatrixClampModeConstantNV> lq =
        createTensorLayoutNV(3, gl_CooperativeMatrixClampModeConstantNV);
    lq = setTensorLayoutDimensionNV(lq, p.n_rows, p.n_head, HD);
    lq = sliceTensorLayoutNV(lq, r0, rows, h0, g, 0, HD);
    ACC(BR, HD) qf;
    coopMatLoadTensorNV(qf, act, p.q_off, lq);
    coopmat<float16_t, gl_ScopeWorkgroup, BR, HD, gl_MatrixUseAccumulator> qh =
        coopmat<float16_t, gl_ScopeWorkgroup, BR, HD, gl_MatrixUseAccumulator>(qf * p.scale);
    coopmat<float16_t, gl_ScopeWorkgroup, BR, HD, gl_MatrixUseA> q =
        coopmat<float16_t, gl_ScopeWorkgroup, BR, HD, gl_MatrixUseA>(qh);

    // A tile's cache rows of key/value head kvh: consecutive pool rows from kv_row(kb) (BC
    // divides KV_BLOCK), [row][HD] with a row stride of n_kv·HD, as many as the tile has written
    // keys (the rest clamp to zero).
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lkv =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tensorViewNV<2, false, 1, 0> tr = createTensorViewNV(2, false, 1, 0);

    ACC(BR, HD) o = ACC(BR, HD)(0.0);
    ACC(BR, BC) m = ACC(BR, BC)(NEG_INF);
    ACC(BR, BC) l = ACC(BR, BC)(0.0);
    const uint qpos0 = pos0 + r0;

    for (uint kb = 0; kb < n_keys; kb += BC) {
        const uint kv_base = (kv_row(kb) * p.n_kv + kvh) * HD;
        // Every key of the tile written: its loads need no clamping (NV's compiler takes the
        // clamped loads' slower path, as the GEMM tiles' edge tiles do).
        const bool inner = UNCLAMPED_INNER != 0u && kb + BC <= n_keys;
        tensorLayoutNV<2> lu = createTensorLayoutNV(2);
        lu = setTensorLayoutDimensionNV(lu, BC, HD);
        lu = setTensorLayoutStrideNV(lu, p.n_kv * HD, 1);
        tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lt =
            setTensorLayoutDimensionNV(lkv, min(BC, n_keys - kb), HD);
        lt = setTensorLayoutStrideNV(lt, p.n_kv * HD, 1);
        coopmat<float16_t, gl_ScopeWorkgroup, HD, BC, gl_MatrixUseB> kt;
        if (inner)
            coopMatLoadTensorNV(kt, kc, kv_base, sliceTensorLayoutNV(lu, 0, BC, 0, HD), tr);
        else
            coopMatLoadTensorNV(kt, kc, kv_base, sliceTensorLayoutNV(lt, 0, BC, 0, HD), tr);
        ACC(BR, BC) s = coopMatMulAdd(q, kt, ACC(BR, BC)(0.0));
        // (A tile every row sees whole, its last key at or before the first row's position,
        // needs no mask.)
        if (UNCLAMPED_INNER == 0u || kb + BC > qpos0 + 1u)
            coopMatPerElementNV(s, s, causal, qpos0, kb, n_keys, g);

        ACC(BR, BC) rowmax;
        coopMatReduceNV(rowmax, s, gl_CooperativeMatrixReduceRowNV, max_op);
        ACC(BR, BC) m_new;
        coopMatPerElementNV(m_new, m, new_max, rowmax);
        ACC(BR, BC) pr;
        coopMatPerElementNV(pr, s, exp_diff, m_new);
        ACC(BR, BC) alpha;
        coopMatPerElementNV(alpha, m, exp_diff, m_new);
        m = m_new;

        ACC(BR, BC) rowsum;
        coopMatReduceNV(rowsum, pr, gl_CooperativeMatrixReduceRowNV, add_op);
        l = l * alpha + rowsum;

        ACC(BR, HD) alpha_o;
        coopMatReduceNV(alpha_o, alpha, gl_CooperativeMatrixReduceRowNV, max_op);
        o = o * alpha_o;

        coopmat<float16_t, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator> ph =
            coopmat<float16_t, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator>(pr);
        coopmat<float16_t, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseA> pa =
            coopmat<float16_t, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseA>(ph);
        coopmat<float16_t, gl_ScopeWorkgroup, BC, HD, gl_MatrixUseB> v;
        if (inner)
            coopMatLoadTensorNV(v, vc, kv_base, sliceTensorLayoutNV(lu, 0, BC, 0, HD));
        else
            coopMatLoadTensorNV(v, vc, kv_base, sliceTensorLayoutNV(lt, 0, BC, 0, HD));
        o = coopMatMulAdd(pa, v, o);
    }

    ACC(BR, HD) l_o;
    coopMatReduceNV(l_o, l, gl_CooperativeMatrixReduceRowNV, max_op);
    o = o / l_o;

    if (p.gate_off != 0xffffffffu) {
        tensorLayoutNV<3, gl_CooperativeMatrixClampModeConstantNV> lg =
            createTensorLayoutNV(3, gl_CooperativeMatrixClampModeConstantNV);
        lg = setTensorLayoutDimensionNV(lg, p.n_rows, p.n_head, HD);
        lg = setTensorLayoutStrideNV(lg, p.gate_row, p.gate_stride, 1);
        ACC(BR, HD) gt;
        coopMatLoadTensorNV(gt, act, p.gate_off, sliceTensorLayoutNV(lg, r0, rows, h0, g, 0, HD));
        coopMatPerElementNV(o, o, gated, gt);
    }

    tensorLayoutNV<3, gl_CooperativeMatrixClampModeConstantNV> lo =
        createTensorLayoutNV(3, gl_CooperativeMatrixClampModeConstantNV);
    lo = setTensorLayoutDimensionNV(lo, p.n_rows, p.n_head, HD);
    lo = setTensorLayoutStrideNV(lo, p.o_row, HD, 1);
    coopMatStoreTensorNV(o, act, p.o_off, sliceTensorLayoutNV(lo, r0, rows, h0, g, 0, HD));
}
