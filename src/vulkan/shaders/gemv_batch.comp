// Y[b] = W·X[b] for a batch of nvec vectors (the decode tokens of a batched step, or a prefill
// window of a few rows): X is [nvec][ncols] F32 at x_off (row stride ncols), Y is [nvec][nrows]
// F32 at y_off (row stride nrows), written or added to (mode 1: the residual stream). W is in its
// GGUF block format (WTYPE_* define), in the device's layout (weight_layout.h).
//
// Why: a step of a few tokens is bound, like one token's decode, by streaming the weights, and a
// GEMM tile built for hundreds of rows runs it as a long chain of dependent steps over K in few
// workgroups. Here every weight slice is loaded from memory once for NB vectors (read again from
// the L1 for each, or decoded once for all: DECODE_ONCE), as the decode GEMV (gemv.comp, whose
// slice products this shares: gemv_slices.glsl) does for one.
//
// Layout of the work: a workgroup takes ROWS rows; its threads take the rows' slices t, t + WG,
// ...; for each slice the NB vectors' x values are read (the same for every thread of a slice
// position, so from cache) and each of ROWS · NB sums gets the slice's product, so one load of
// x serves ROWS rows (or, DECODE_ONCE, each row's slice is decoded once for the NB vectors).
// The sums are reduced over the workgroup by subgroupAdd (SUBGROUP) or a shared-memory tree.
// More than NB vectors are taken in groups of NB: workgroup z takes `span` of them one after
// another, its rows' bytes (a few KiB) then read again from the L1 cache, not memory, and a
// matrix of few row blocks (an expert's) over many vectors (a window's pairs) spreads its groups
// over workgroups rather than walking them all in a few. A last group past nvec computes clamped
// vectors and stores nothing for them.
//
// EXPERTS: the matrix is the stack of a mixture-of-experts layer's experts (expert_rows rows
// each, of which nrows from first_row are read), and vector v is the pair v = row · k + slot of
// the window's choice: its weight rows are those of expert route[route_off + row · 2k + slot]
// (moe_route.comp wrote the ids and, after them, the weights). x_per_slot 0: a row's k vectors
// all read the row's x (the gate and up projections); 1: each vector reads its own (the down
// projection over the slots' SwiGLU outputs). sum 1 (NB = k, a group one row): the slots'
// outputs are weighted and summed into the row's one output, in slot order (ids ascending).
// With perm_off, vector v is pair route[perm_off + v] (moe_sort.comp: the pairs grouped by
// expert, so a group's vectors mostly read the same rows, from memory once) and its output
// goes to the pair's place; not with sum. With sum the workgroup's threads take the group's
// (vector, slice) pairs rather than every vector of a slice (sum_group()): each vector reads
// another expert's rows, and an expert's short rows (512 values: 16 slices) would otherwise
// leave most threads idle while each of the rest decoded k experts' slices.
//
// shared_off (EXPERTS, sum, one row): the row's sum also adds the shared expert's output
// y[shared_off ..] times the sigmoid of its gate's logit y[gate_off] (both written by earlier
// stages): the token's shared expert needs no stage of its own to join h.
//
// up_off (EXPERTS, F32 x): x_off holds the gates of a SwiGLU and up_off its ups, laid out alike,
// and the vectors are SiLU(gate) · up, formed as they are read: the token's down projection
// needs no SwiGLU pass (and no barrier) of its own.
//
// X_INT8 (block formats, devices with integer dot products): x is the nvec vectors rounded to
// signed bytes (round_rows.comp: x_off and the vectors' stride in words of that layout), and a
// slice meets them in packed integer dot products (gemv_slices_bytes.glsl), as the decode GEMV
// does over its rounded x. Each row's slice is prepared once (its words and terms,
// slice_words()) and met by every vector of the group, whose rounded values are read once for
// all ROWS rows: neither the decoding of the weights nor the reads of x is repeated.
#version 450

#extension GL_EXT_control_flow_attributes : enable
#if defined(X_INT8)
#extension GL_EXT_integer_dot_product : require
#endif
#if defined(SUBGROUP)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;    // threads, a power of two
layout(constant_id = 1) const uint ROWS = 4;    // weight rows a workgroup
layout(constant_id = 2) const uint W16 = 1;     // 1: the weight view is 16-byte aligned
layout(constant_id = 3) const uint X16 = 1;     // 1: every vector of x starts 16-byte aligned
layout(constant_id = 4) const uint NB = 8;      // vectors a group, 1 to 8
// 1 (block formats): each row's slice is decoded to floats once and multiplied into the group's
// NB vectors, their x read again for every row (from the L1), where the group's vectors read the
// same rows (EXPERTS: the same expert, as the window's pairs grouped by expert mostly do); 0 (or
// a group of several experts): each vector's x is read once and every row's slice decoded again
// for it.
layout(constant_id = 5) const uint DECODE_ONCE = 0;
// Columns of the partial sums: the most subgroups a workgroup may hold (SUBGROUP: WG over the
// device's smallest subgroup size), else WG.
layout(constant_id = 6) const uint NSG = 128;

layout(std430, binding = 0) readonly buffer Weights { uint wq[]; };
layout(std430, binding = 0) readonly buffer Weights4 { uvec4 wq4[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 1) readonly buffer XQ4 { uvec4 gxq4[]; };  // X_INT8: the rounded x
layout(std430, binding = 1) readonly buffer XD2 { vec2 gxd2[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
#if defined(EXPERTS)
layout(std430, binding = 3) readonly buffer Route { uint route[]; };
#endif

layout(push_constant) uniform Push {
    uint ncols;      // elements per row (and the stride of x's vectors)
    uint nrows;      // rows (and the stride of y's vectors)
    uint row_bytes;  // bytes per weight row
    uint x_off;      // in floats (X_INT8: in words of the rounded layout)
    uint y_off;      // in floats
    uint mode;       // 0: y = W·x, 1: y += W·x
    uint nvec;       // vectors
    uint span;       // groups of NB vectors a workgroup takes, from workgroup z's first
#if defined(EXPERTS)
    uint k, route_off, x_per_slot, sum;
    uint expert_rows;  // rows an expert holds in the stack (nrows, or more: gate and up fused)
    uint first_row;    // the first of them this GEMV reads
    uint perm_off;     // 0xffffffff: vector v is pair v; else pair route[perm_off + v]
    uint up_off;       // F32 x: 0xffffffff, or x is gates and these ups (floats), x = SiLU(g) · u
    uint shared_off;   // sum: 0xffffffff, or the shared expert's output (floats of y) ...
    uint gate_off;     // ... and its gate's logit
#endif
} p;

#include "blocks.glsl"

// 16 bytes at byte offset o (a multiple of 16 when W16 is set, else of 4).
uvec4 load16(uint o) {
    if (W16 != 0u) return wq4[o >> 4];
    uint i = o >> 2;
    return uvec4(wq[i], wq[i + 1u], wq[i + 2u], wq[i + 3u]);
}

#if defined(EXPERTS)
// The (row, slot) pair of vector v, pair = row · k + slot; the helpers below take pairs.
uint pair_of(uint v) { return p.perm_off == 0xffffffffu ? v : route[p.perm_off + v]; }
uint x_vector(uint v) { return p.x_per_slot != 0u ? v : v / p.k; }
uint expert_of(uint v) { return route[p.route_off + (v / p.k) * 2u * p.k + v % p.k]; }
float weight_of(uint v) { return uintBitsToFloat(route[p.route_off + (v / p.k) * 2u * p.k + p.k + v % p.k]); }
// A sum's output o for weight row `row`: s, plus what y held (mode 1), plus the shared expert's
// gated row (shared_off).
float sum_output(float s, uint o, uint row) {
    if (p.mode == 1u) s += y[o];
    if (p.shared_off != 0xffffffffu) s += y[p.shared_off + row] / (1.0 + exp(-y[p.gate_off]));
    return s;
}
#else
uint pair_of(uint v) { return v; }
uint x_vector(uint v) { return v; }
#endif

// Four floats of vector b of x starting at element e (a multiple of 4).
vec4 xload4(uint b, uint e) {
    uint i = p.x_off + x_vector(b) * p.ncols + e;
    vec4 v = X16 != 0u ? x4[i >> 2] : vec4(x[i], x[i + 1u], x[i + 2u], x[i + 3u]);
#if defined(EXPERTS)
    if (p.up_off != 0xffffffffu) {  // x holds a SwiGLU's gates, up_off its ups: SiLU(g) · u
        uint j = p.up_off + (i - p.x_off);
        vec4 u = X16 != 0u ? x4[j >> 2] : vec4(x[j], x[j + 1u], x[j + 2u], x[j + 3u]);
        v = v / (1.0 + exp(-v)) * u;
    }
#endif
    return v;
}
#include "gemv_slices.glsl"

#if defined(X_INT8)
const uint ABLATE = 0u, WIDE = 0u;  // x_slice.glsl's knobs of gemv.comp: none here
#include "round_bytes.glsl"
// The word where the rounded vector the next x_slice() reads starts (x_vector()'s).
uint xbase;
uvec4 xq_at(uint e) { return gxq4[(xbase >> 2) + e]; }
vec2 xd_at(uint e) { return gxd2[((xbase + p.ncols / 4u) >> 1) + e]; }
#include "x_slice.glsl"
#include "gemv_slices_bytes.glsl"
// The slice of 32 values of vector b of x (its pair's x vector) that slice (blk, part) meets.
XSlice x_slice_of(uint b, uint blk, uint part) {
    xbase = p.x_off + x_vector(b) * (p.ncols / 4u + p.ncols / 8u);
    return x_slice(blk, part);
}
#endif

#if (defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K) || defined(WTYPE_Q6_K))
const uint TPB = 8u, BLOCK = 256u;
#else  // Q4_0, Q8_0, F32, F16
const uint TPB = 1u, BLOCK = 32u;
#endif

const uint NS = ROWS * NB;      // sums a thread holds: row r, vector b at r · NB + b
shared float partial[NS][NSG];  // [sum][subgroup] (SUBGROUP), else [sum][thread]

// Sums a[i] of every thread of the workgroup, sum i stored as row i / NB of vector g0 + i % NB
// (where both exist), each by thread i % WG.
void store_sums(float a[NS], uint tid, uint row0, uint g0) {
#if defined(SUBGROUP)
    [[unroll]] for (uint i = 0; i < NS; ++i) {
        float v = subgroupAdd(a[i]);
        if (subgroupElect()) partial[i][gl_SubgroupID] = v;
    }
    barrier();
    // Sum i's total into partial[i][0] (only this thread reads or writes sum i's row here).
    for (uint i = tid; i < NS; i += WG) {
        float v = 0.0;
        for (uint g = 0; g < gl_NumSubgroups; ++g) v += partial[i][g];
        partial[i][0] = v;
    }
#else
    [[unroll]] for (uint i = 0; i < NS; ++i) partial[i][tid] = a[i];
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s)
            for (uint i = 0; i < NS; ++i) partial[i][tid] += partial[i][tid + s];
        barrier();
    }
#endif
#if defined(EXPERTS)
    if (p.sum != 0u) {
        barrier();  // every total in partial[..][0]
        uint row = row0 + tid;
        if (tid < ROWS && row < p.nrows) {
            float s = 0.0;
            for (uint b = 0; b < NB; ++b) s += weight_of(g0 + b) * partial[tid * NB + b][0];
            uint o = p.y_off + (g0 / p.k) * p.nrows + row;
            y[o] = sum_output(s, o, row);
        }
        return;
    }
#endif
    for (uint i = tid; i < NS; i += WG) {
        uint row = row0 + i / NB, b = g0 + i % NB;
        if (row < p.nrows && b < p.nvec) {
            float v = partial[i][0];
            uint o = p.y_off + pair_of(b) * p.nrows + row;
            if (p.mode == 1u) v += y[o];
            y[o] = v;
        }
    }
}

#if defined(EXPERTS)
// The weighted sum of the group of NB slots from g0 (a row's k) for the workgroup's rows: thread
// lt takes (vector, slice) pairs lt, lt + WG, ... and sums w_b · (its expert's row slice · its x
// slice) for each row; the rows' sums are reduced over the workgroup and stored (added in
// mode 1) at the row's output.
void sum_group(uint g0, uint tid, uint lt, uint row0) {
    float acc[ROWS];
    [[unroll]] for (uint r = 0; r < ROWS; ++r) acc[r] = 0.0;
#if defined(WTYPE_F32) || defined(WTYPE_F16)
    uint slices = p.ncols / 32u;
#else
    uint slices = (p.ncols / BLOCK) * TPB;
#endif
    for (uint i = lt; i < NB * slices && g0 + i / slices < p.nvec; i += WG) {
        uint v = g0 + i / slices, s = i % slices;
        uint base = expert_of(v) * p.expert_rows + p.first_row;
        float wt = weight_of(v);
#if defined(WTYPE_F32) || defined(WTYPE_F16)
        vec4 xv[8];
        [[unroll]] for (uint j = 0; j < 8u; ++j) xv[j] = xload4(v, s * 32u + 4u * j);
        [[unroll]] for (uint r = 0; r < ROWS; ++r)
            acc[r] += wt * unit_dot(w_row(base + min(row0 + r, p.nrows - 1u), p.row_bytes), s, xv);
#elif defined(X_INT8)
        uint blk = s / TPB, part = s % TPB;
        XSlice xs = x_slice_of(v, blk, part);
        [[unroll]] for (uint r = 0; r < ROWS; ++r)
            acc[r] += wt * slice_dot_i8(w_row(base + min(row0 + r, p.nrows - 1u), p.row_bytes),
                                        blk, part, xs);
#else
        uint blk = s / TPB, part = s % TPB;
        vec4 xv[8];
        [[unroll]] for (uint j = 0; j < 8u; ++j) xv[j] = xload4(v, slice_x(blk, part, j));
        vec2 xs = vec2(dot(xv[0] + xv[1] + xv[2] + xv[3], vec4(1.0)),
                       dot(xv[4] + xv[5] + xv[6] + xv[7], vec4(1.0)));
        [[unroll]] for (uint r = 0; r < ROWS; ++r)
            acc[r] += wt * slice_dot(w_row(base + min(row0 + r, p.nrows - 1u), p.row_bytes), blk,
                                     part, xv, xs);
#endif
    }
    // The rows' totals into partial[r][0], as store_sums() reduces (ROWS <= NS).
#if defined(SUBGROUP)
    [[unroll]] for (uint r = 0; r < ROWS; ++r) {
        float v = subgroupAdd(acc[r]);
        if (subgroupElect()) partial[r][gl_SubgroupID] = v;
    }
    barrier();
    if (tid < ROWS) {
        float v = 0.0;
        for (uint g = 0; g < gl_NumSubgroups; ++g) v += partial[tid][g];
        partial[tid][0] = v;
    }
#else
    [[unroll]] for (uint r = 0; r < ROWS; ++r) partial[r][tid] = acc[r];
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s)
            for (uint r = 0; r < ROWS; ++r) partial[r][tid] += partial[r][tid + s];
        barrier();
    }
#endif
    uint row = row0 + tid;
    if (tid < ROWS && row < p.nrows) {
        uint o = p.y_off + (g0 / p.k) * p.nrows + row;
        y[o] = sum_output(partial[tid][0], o, row);
    }
}
#endif

void main() {
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint tid = gl_LocalInvocationID.x;
    uint row0 = wg * ROWS;
    if (row0 >= p.nrows) return;  // the grid's overshoot: the whole workgroup leaves
#if defined(SUBGROUP)
    uint lt = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#else
    uint lt = tid;
#endif
    // Rows past the end are computed on row nrows-1 (never read out of range) and not stored.
#if !defined(EXPERTS)
    uint rb[ROWS];
    [[unroll]] for (uint r = 0; r < ROWS; ++r) rb[r] = w_row(min(row0 + r, p.nrows - 1u), p.row_bytes);
#define RB(r, b) rb[r]
#else
    uint rbx[ROWS * NB];  // each vector's expert's rows
#define RB(r, b) rbx[(r) * NB + (b)]
#endif

    const uint first = gl_WorkGroupID.z * p.span * NB, end = min(p.nvec, first + p.span * NB);
#if defined(EXPERTS)
    if (p.sum != 0u) {
        for (uint g0 = first; g0 < end; g0 += NB) {
            if (g0 != first) barrier();  // the previous group's totals are read out
            sum_group(g0, tid, lt, row0);
        }
        return;
    }
#endif
    for (uint g0 = first; g0 < end; g0 += NB) {
        // The previous group's sums are read out of the partials before they are rewritten.
        if (g0 != first) barrier();
        uint vb[NB];
        [[unroll]] for (uint b = 0; b < NB; ++b) vb[b] = pair_of(min(g0 + b, p.nvec - 1u));
        bool one_expert = true;  // every vector of the group reads the same rows
#if defined(EXPERTS)
        [[unroll]] for (uint b = 0; b < NB; ++b) {
            uint e = expert_of(vb[b]), base = e * p.expert_rows + p.first_row;
            one_expert = one_expert && e == expert_of(vb[0]);
            [[unroll]] for (uint r = 0; r < ROWS; ++r)
                RB(r, b) = w_row(base + min(row0 + r, p.nrows - 1u), p.row_bytes);
        }
#endif
        float acc[NS];
        [[unroll]] for (uint i = 0; i < NS; ++i) acc[i] = 0.0;
#if defined(WTYPE_F32) || defined(WTYPE_F16)
        // Rows of whole 32-value units (the launcher checks): read as 16-byte vectors.
        uint units = p.ncols / 32u;
        for (uint u = lt; u < units; u += WG) {
            [[unroll]] for (uint b = 0; b < NB; ++b) {
                vec4 xv[8];
                [[unroll]] for (uint i = 0; i < 8u; ++i) xv[i] = xload4(vb[b], u * 32u + 4u * i);
                [[unroll]] for (uint r = 0; r < ROWS; ++r) acc[r * NB + b] += unit_dot(RB(r, b), u, xv);
            }
        }
#elif defined(X_INT8)
        uint slices = (p.ncols / BLOCK) * TPB;
        for (uint s = lt; s < slices; s += WG) {
            uint blk = s / TPB, part = s % TPB;
            if (one_expert) {
                uvec4 wa[ROWS], wb[ROWS];
                vec4 wc[ROWS];
                [[unroll]] for (uint r = 0; r < ROWS; ++r)
                    slice_words(RB(r, 0), blk, part, wa[r], wb[r], wc[r]);
                [[unroll]] for (uint b = 0; b < NB; ++b) {
                    XSlice xs = x_slice_of(vb[b], blk, part);
                    [[unroll]] for (uint r = 0; r < ROWS; ++r)
                        acc[r * NB + b] += words_dot(wa[r], wb[r], wc[r], xs);
                }
            } else {  // the group's vectors read several experts' rows
                [[unroll]] for (uint b = 0; b < NB; ++b) {
                    XSlice xs = x_slice_of(vb[b], blk, part);
                    [[unroll]] for (uint r = 0; r < ROWS; ++r)
                        acc[r * NB + b] += slice_dot_i8(RB(r, b), blk, part, xs);
                }
            }
        }
#else
        uint slices = (p.ncols / BLOCK) * TPB;
        if (DECODE_ONCE != 0u && one_expert) {
            for (uint s = lt; s < slices; s += WG) {
                uint blk = s / TPB, part = s % TPB;
                [[unroll]] for (uint r = 0; r < ROWS; ++r) {
                    vec4 w[8];
                    slice_values(RB(r, 0), blk, part, w);
                    [[unroll]] for (uint b = 0; b < NB; ++b) {
                        float a = 0.0;
                        [[unroll]] for (uint i = 0; i < 8u; ++i)
                            a += dot(w[i], xload4(vb[b], slice_x(blk, part, i)));
                        acc[r * NB + b] += a;
                    }
                }
            }
            store_sums(acc, tid, row0, g0);
            continue;
        }
        for (uint s = lt; s < slices; s += WG) {
            uint blk = s / TPB, part = s % TPB;
            [[unroll]] for (uint b = 0; b < NB; ++b) {
                vec4 xv[8];
                [[unroll]] for (uint i = 0; i < 8u; ++i) xv[i] = xload4(vb[b], slice_x(blk, part, i));
                // Sums of x over the two 16-element runs (the Q4_K / Q5_K mins).
                vec2 xs = vec2(dot(xv[0] + xv[1] + xv[2] + xv[3], vec4(1.0)),
                               dot(xv[4] + xv[5] + xv[6] + xv[7], vec4(1.0)));
                [[unroll]] for (uint r = 0; r < ROWS; ++r)
                    acc[r * NB + b] += slice_dot(RB(r, b), blk, part, xv, xs);
            }
        }
#endif
        store_sums(acc, tid, row0, g0);
    }
}
