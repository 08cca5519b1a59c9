// y = W·x for one weight matrix in a GGUF block format (chosen by the WTYPE_* define), batch 1.
// mode 0 writes y, mode 1 adds to y (the residual stream), so no separate add pass is needed.
//
// Why it is shaped this way: decode is bound by the bandwidth of streaming the weights once, so
// the kernel is built around the loads, not the arithmetic.
//  - A row is cut into slices of 32 weights, a fixed number per block (8 for the 256-element
//    k-quants, 1 for the 32-element formats). Thread t of the workgroup takes slices t, t + WG,
//    ..., so adjacent threads read adjacent pieces of the same run of blocks: a subgroup of 32
//    covers 4 whole Q4_K blocks (576 contiguous bytes) per step, every byte fetched once.
//  - Q5_K blocks (176 bytes) stay 16-byte aligned when the tensor is, so a slice is one uvec4 of
//    nibbles plus the block's 16-byte header (d, dmin, scales; the 8 threads of a block read the
//    same header, one transaction). Q4_K and Q6_K rows are held in tiles (weight_layout.h), every
//    16-byte field of a block 16-byte aligned: a Q4_K slice is the header and one uvec4 of
//    nibbles, a Q6_K slice one uvec4 of low nibbles and one of high bits (the tiled GEMV,
//    gemv_tile.comp, reads the tiles faster; this kernel serves the forms and devices it does
//    not). Blocks of 18 and 34 bytes are only 2-byte aligned: they are read as aligned words
//    joined by funnel shifts (load16_a2).
//  - Each workgroup computes ROWS rows with one x slice: x is read once per slice (as vec4 when
//    x + x_off is 16-byte aligned) and reused for every row, and each thread has ROWS independent
//    weight loads in flight per step. WG adapts to the row length (launcher) so short rows do not
//    leave most threads idle.
//  - The per-row sums are combined with subgroupAdd when the SUBGROUP variant is built and the
//    device has subgroup arithmetic (no subgroup size is assumed: partials are indexed by
//    gl_SubgroupID), else by a shared-memory tree.
//  - Row groups (GROUPS, X_INT8): every workgroup reads all of x, and right after a barrier
//    those reads go to the few L2 lines that hold x, from every workgroup at once; on an H200
//    that traffic, not the weights, bounded the decode GEMVs. A workgroup of GROUPS row groups
//    rounds x once for GROUPS · ROWS rows, cutting it by GROUPS (9B decode 183 -> 217 t/s at 4).
//  - Row blocks (GROUPS · ROWS rows each) may outnumber the workgroups of the grid: each
//    workgroup then takes blocks wg, wg + grid, ... over the x it rounded once, so on a grid of
//    a few workgroups a multiprocessor (the launcher's choice) the rounding of x and the
//    workgroup's launch are paid once per workgroup rather than once per block.
//
// The parts, in the order they are included:
//  - gemv_slices.glsl: the slice products over x as floats, one a weight format.
//  - gemv_x_bytes.glsl (X_INT8): x rounded to signed bytes in shared memory, and the forms of x
//    it reads (NORM_IN, GATED_IN, XPRE); gemv_slices_bytes.glsl: the slice products over it.
//  - gemv_epilogue.glsl: what becomes of the summed rows (the SwiGLU of a pair, NORM_IN's
//    factor, NORM_EPILOGUE, ROUND_OUT).
//  - main() below: the loop over row blocks, slices and the rows' reduction and store.
//
// The fused variants for the decode token command, where a tiny dependent dispatch costs a
// barrier's latency (~4 us on an H200) whatever its work:
//  - SWIGLU_PAIR: the FFN gate and up projections in one dispatch, y = silu(gate·x) · (up·x).
//    Both matrices lie in the bound weight view (at byte offsets g_off and u_off); a workgroup
//    takes ROWS rows of each, so every x slice it reads serves 2·ROWS rows, and the SwiGLU
//    needs no stage of its own.
//  - NORM_EPILOGUE, ROUND_OUT: gemv_epilogue.glsl; NORM_IN, GATED_IN, XPRE: gemv_x_bytes.glsl.
#version 450

#extension GL_EXT_control_flow_attributes : enable
#if defined(X_INT8)
#extension GL_EXT_integer_dot_product : require
#endif
#if defined(SUBGROUP)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#if defined(X_INT8)
#extension GL_KHR_shader_subgroup_shuffle : require  // quantize_x_lanes (the launcher checks)
#endif
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;   // threads, a power of two
layout(constant_id = 1) const uint ROWS = 4;   // rows per workgroup (of each matrix)
layout(constant_id = 2) const uint W16 = 1;    // 1: the weight view is 16-byte aligned
layout(constant_id = 3) const uint X16 = 1;    // 1: x + x_off is 16-byte aligned
layout(constant_id = 4) const uint XBLOCKS = 1;  // X_INT8: 32-value runs of x (ncols / 32)
// The GEMV speed report's ablations (results then wrong): bit 0 leaves out the reads of x (every
// value 1), bit 1 the Q4_K decode and products (the loaded words are only folded together), bit 2
// (X_INT8) the whole rounding of x into shared memory and its barrier (every byte 1, from
// registers): what a GEMV over x rounded once beforehand could save at most.
layout(constant_id = 5) const uint ABLATE = 0;
// Row groups: the workgroup's threads split into GROUPS groups of GW = WG / GROUPS, each taking
// ROWS rows of its own over the same x (so the x rounded to bytes in shared memory is read from
// memory and rounded once for GROUPS · ROWS rows). The launcher keeps GW a multiple of the
// largest subgroup size. With subgroup arithmetic a thread's place is counted by its subgroup
// (subgroup id · subgroup size + its index in it), not by its invocation index, so each subgroup
// lies in one group whatever order the implementation forms subgroups in.
layout(constant_id = 6) const uint GROUPS = 1;
const uint GW = WG / GROUPS;
// Q4_K / Q6_K over x in bytes: 1 makes a slice 64 weights instead of 32 (Q4_K: the 32 bytes of
// nibbles of a sub-block pair, under one header; Q6_K: values 0-31 of quarters c and c + 2 of a
// half, under one pair of scale words), so a thread pays a slice's fixed work (header, scales,
// the float terms) once for twice the weights.
layout(constant_id = 7) const uint WIDE = 0;
// NORM_IN: the RMSNorm's epsilon.
layout(constant_id = 8) const float NORM_EPS = 1e-6;
// X_INT8 without NORM_IN: 1 where x_off points at x rounded by the GEMV that wrote it (XPRE,
// gemv_x_bytes.glsl).
layout(constant_id = 9) const uint XPRE = 0;
// X_INT8 without NORM_EPILOGUE: 1 rounds the rows stored to bytes at y[xr_off ..]
// (gemv_epilogue.glsl). The row blocks (GROUPS · ROWS rows) are whole 16-value blocks (the launcher checks).
layout(constant_id = 10) const uint ROUND_OUT = 0;
// GATED_IN: the value head size and the column groups a head (gemv_x_bytes.glsl); the epsilon is
// NORM_EPS.
layout(constant_id = 11) const uint GIN_DV = 128;
layout(constant_id = 12) const uint GIN_G = 1;
#if defined(GATED_IN) && (!defined(X_INT8) || defined(NORM_IN) || defined(NORM_EPILOGUE) || defined(SWIGLU_PAIR))
#error "GATED_IN is for the plain byte path"
#endif
#if defined(NORM_IN) && (defined(NORM_EPILOGUE) || !defined(X_INT8))
#error "NORM_IN is for the byte path, and a GEMV over a norm's input does not end in one"
#endif
// The plain byte GEMVs (the residual updates of the token command: the out and down projections)
// read their rows' residual values ahead (RES_AHEAD). It costs those variants no register on an
// H200; in the NORM_IN and SWIGLU_PAIR variants, which the token command runs in mode 0, it cost
// 7 (64 -> 71) and halved their workgroups a multiprocessor.
#if defined(X_INT8) && !defined(NORM_IN) && !defined(SWIGLU_PAIR) && !defined(NORM_EPILOGUE)
#define RES_AHEAD 1
#endif

// The weights and x are each bound twice: as words / floats and as 16-byte vectors.
layout(std430, binding = 0) readonly buffer Weights { uint wq[]; };
layout(std430, binding = 0) readonly buffer Weights4 { uvec4 wq4[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
#if defined(NORM_EPILOGUE)
layout(std430, binding = 2) coherent buffer Y { float y[]; };
layout(std430, binding = 3) readonly buffer NormW { float norm_w[]; };
layout(std430, binding = 4) buffer Counter { uint counter[]; };
#else
layout(std430, binding = 2) buffer Y { float y[]; };
#endif
#if defined(NORM_IN)
// The norm weights, 16-byte aligned (the launcher checks the view).
layout(std430, binding = 3) readonly buffer NormIn { vec4 nin_w4[]; };
#endif
#if defined(X_INT8)
// XPRE: the rounded x as bytes (16 a block) and block terms.
layout(std430, binding = 1) readonly buffer XQ4 { uvec4 gxq4[]; };
layout(std430, binding = 1) readonly buffer XD2 { vec2 gxd2[]; };
#if !defined(NORM_EPILOGUE)
// ROUND_OUT: the bytes of the rounding, four a word.
layout(std430, binding = 2) buffer YW { uint yw[]; };
#endif
#endif

layout(push_constant) uniform Push {
    uint ncols;      // elements per row
    uint nrows;
    uint row_bytes;  // bytes per weight row
    uint x_off;      // in floats
    uint y_off;      // in floats
    uint mode;       // 0: y = W·x, 1: y += W·x
#if defined(SWIGLU_PAIR)
    uint g_off, u_off;  // SWIGLU_PAIR: byte offsets of the gate and up matrices in the view
#endif
#if !defined(NORM_EPILOGUE)
    uint xr_off;  // ROUND_OUT: where the rounding of y goes, in floats
#endif
#if defined(GATED_IN)
    uint gin_off;  // the column groups' sums of squares, in floats of the x binding
#endif
#if defined(NORM_EPILOGUE)
    uint xn_off;       // NORM_EPILOGUE: where the normalized y goes, in floats
    uint counter_idx;  // NORM_EPILOGUE: the word of binding 4 that counts finished workgroups
    float eps;         // NORM_EPILOGUE
#endif
} p;

#include "blocks.glsl"

// Rows a workgroup accumulates: ROWS, or ROWS of each matrix of a pair (gate rows first).
#if defined(SWIGLU_PAIR)
const uint NR = 2u * ROWS;
#else
const uint NR = ROWS;
#endif

// Slices of 32 weights per block (TPB) and block geometry.
#if (defined(WTYPE_Q4_K) || defined(WTYPE_Q6_K)) && defined(X_INT8)
const uint TPB = 8u >> WIDE, BLOCK = 256u;
#elif defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K) || defined(WTYPE_Q6_K)
const uint TPB = 8u, BLOCK = 256u;
#else  // Q4_0, Q8_0, F32, F16
const uint TPB = 1u, BLOCK = 32u;
#endif

// 16 bytes at byte offset o (a multiple of 16 when W16 is set, else of 4).
uvec4 load16(uint o) {
    if (W16 != 0u) return wq4[o >> 4];
    uint i = o >> 2;
    return uvec4(wq[i], wq[i + 1u], wq[i + 2u], wq[i + 3u]);
}

// Four floats of x starting at element e (relative to x_off; a multiple of 4), and one float.
vec4 xload4(uint e) {
    if (X16 != 0u) return x4[(p.x_off + e) >> 2];
    uint i = p.x_off + e;
    return vec4(x[i], x[i + 1u], x[i + 2u], x[i + 3u]);
}
float xload1(uint e) { return x[p.x_off + e]; }
#include "gemv_slices.glsl"
#if defined(X_INT8)
#include "gemv_x_bytes.glsl"
#include "gemv_slices_bytes.glsl"
#endif

// Per-thread (shared tree) or per-subgroup (SUBGROUP; at most WG subgroups) partial sums.
shared float partial[NR][WG];

#include "gemv_epilogue.glsl"

void main() {
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint tid = gl_LocalInvocationID.x;
    // Row blocks of GROUPS · ROWS rows. A grid with fewer workgroups than blocks has each
    // workgroup take blocks wg, wg + grid, ... over the x it read once (see the top).
    uint blocks = (p.nrows + GROUPS * ROWS - 1u) / (GROUPS * ROWS);
    uint grid = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
    if (wg >= blocks) return;  // the grid's overshoot: the whole workgroup leaves
    // This thread's row group and its place in it; a group past the last row computes clamped
    // rows and stores nothing (its threads still meet the workgroup's barriers).
#if defined(SUBGROUP)
    uint lane = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#else
    uint lane = tid;
#endif
    uint grp = lane / GW, lt = lane % GW;
#if defined(X_INT8)
    quantize_x();
#endif
    // The threads that store the rows: thread r < ROWS of each group its group's row r; or, for
    // ROUND_OUT where one subgroup of 16+ holds a block's rows, invocation i < GROUPS · ROWS of
    // subgroup 0 row i of the block, which it then rounds with the others by shuffles, with no
    // barrier to gather them (round_out_lanes).
#if defined(X_INT8) && !defined(NORM_EPILOGUE) && defined(SUBGROUP)
    bool one_sg = ROUND_OUT != 0u && gl_SubgroupSize >= 16u && GROUPS * ROWS <= gl_SubgroupSize;
#else
    const bool one_sg = false;
#endif
#if defined(SUBGROUP)
    uint wgrp = grp, wlt = lt;
    bool writer = lt < ROWS;
    if (one_sg) {
        wgrp = gl_SubgroupInvocationID / ROWS;
        wlt = gl_SubgroupInvocationID % ROWS;
        writer = gl_SubgroupID == 0u && gl_SubgroupInvocationID < GROUPS * ROWS;
    }
#endif
    for (uint blk = wg; blk < blocks; blk += grid) {
        // The previous block's row sums are read out of the partials before they are rewritten.
        if (blk != wg) barrier();
        uint row0 = (blk * GROUPS + grp) * ROWS;
#if defined(RES_AHEAD)
        // Mode 1: the residual value of this thread's row, requested now so that its latency
        // passes under the weights' loads instead of delaying the store (and the barrier after it).
        float res = 0.0;
#if defined(SUBGROUP)
        uint res_row = (blk * GROUPS + wgrp) * ROWS + wlt;
        if (p.mode == 1u && writer && res_row < p.nrows) res = y[p.y_off + res_row];
#else
        if (p.mode == 1u && lt < ROWS && row0 + lt < p.nrows) res = y[p.y_off + row0 + lt];
#endif
#endif

        // Rows past the end are computed on row nrows-1 (never read out of range) and not stored.
        // rb: the rows' handles (blocks.glsl w_row), the pair's matrix offsets (multiples of 32
        // bytes) added.
        uint rb[NR];
        float acc[NR];
        [[unroll]] for (uint r = 0; r < NR; ++r) {
            rb[r] = w_row(min(row0 + r % ROWS, p.nrows - 1u), p.row_bytes);
#if defined(SWIGLU_PAIR)
            rb[r] += r < ROWS ? p.g_off : p.u_off;
#endif
            acc[r] = 0.0;
        }

#if defined(WTYPE_F32) || defined(WTYPE_F16)
        uint units = (p.ncols + 31u) / 32u;
        // Whole units of rows that start aligned are read as 16-byte vectors; a short last unit and
        // rows of odd byte lengths go through unit_values().
        bool vec_rows = (p.row_bytes & (W16 != 0u ? 15u : 3u)) == 0u;
        uint whole = vec_rows ? p.ncols / 32u : 0u;
        for (uint u = lt; u < units; u += GW) {
            if (u < whole) {
                vec4 xv[8];
                [[unroll]] for (uint i = 0; i < 8u; ++i) xv[i] = xload4(u * 32u + 4u * i);
                [[unroll]] for (uint r = 0; r < NR; ++r) acc[r] += unit_dot(rb[r], u, xv);
                continue;
            }
            float xv[32];
            [[unroll]] for (uint e = 0; e < 32u; ++e) {
                uint c = u * 32u + e;
                xv[e] = c < p.ncols ? xload1(c) : 0.0;
            }
            [[unroll]] for (uint r = 0; r < NR; ++r) {
                vec4 v[8];
                unit_values(rb[r], u, p.ncols, v);
                float s = 0.0;
                // Values past ncols are clamped reads of the row; x is 0 there, but a non-finite
                // weight times 0 would still poison the sum, so they are skipped.
                [[unroll]] for (uint e = 0; e < 32u; ++e)
                    s += u * 32u + e < p.ncols ? v[e >> 2][e & 3u] * xv[e] : 0.0;
                acc[r] += s;
            }
        }
#elif defined(X_INT8)
        uint slices = (p.ncols / BLOCK) * TPB;
        for (uint s = lt; s < slices; s += GW) {
            uint blk = s / TPB, part = s % TPB;
            XSlice xs = x_slice(blk, part);
#if defined(WTYPE_Q4_K)
            if ((ABLATE & 2u) != 0u) {
                [[unroll]] for (uint r = 0; r < NR; ++r) {
                    uvec4 hd = load16(tiled_byte(rb[r], blk, 144u, 0u));
                    uvec4 q = load16(tiled_byte(rb[r], blk, 144u, 16u + (16u << WIDE) * part));
                    if (WIDE != 0u)  // the slice's 32 bytes
                        q ^= load16(tiled_byte(rb[r], blk, 144u, 32u + 32u * part));
                    acc[r] += float(dot4(hd.x ^ q.x ^ q.y ^ q.z ^ q.w, xs.a.x));
                }
                continue;
            }
#endif
            [[unroll]] for (uint r = 0; r < NR; ++r) acc[r] += slice_dot_i8(rb[r], blk, part, xs);
        }
#else
        uint slices = (p.ncols / BLOCK) * TPB;
        for (uint s = lt; s < slices; s += GW) {
            uint blk = s / TPB, part = s % TPB;
            vec4 xv[8];
            [[unroll]] for (uint i = 0; i < 8u; ++i)
                xv[i] = (ABLATE & 1u) != 0u ? vec4(1.0) : xload4(slice_x(blk, part, i));
            // Sums of x over the two 16-element runs (the Q4_K / Q5_K mins).
            vec2 xs = vec2(dot(xv[0] + xv[1] + xv[2] + xv[3], vec4(1.0)),
                           dot(xv[4] + xv[5] + xv[6] + xv[7], vec4(1.0)));
#if defined(WTYPE_Q4_K)
            if ((ABLATE & 2u) != 0u) {
                [[unroll]] for (uint r = 0; r < NR; ++r) {
                    uvec4 hd = load16(tiled_byte(rb[r], blk, 144u, 0u));
                    uvec4 q = load16(tiled_byte(rb[r], blk, 144u, 16u + 16u * part));
                    uint folded = (hd.x ^ q.x ^ q.y ^ q.z ^ q.w) & 0x3fffffffu;
                    acc[r] += uintBitsToFloat(folded | 0x3f000000u) * xv[0].x;
                }
                continue;
            }
#endif
            [[unroll]] for (uint r = 0; r < NR; ++r) acc[r] += slice_dot(rb[r], blk, part, xv, xs);
        }
#endif

        // The writers (above) store the rows, each value also in vout.
        float vout = 0.0;
#if defined(SUBGROUP)
        [[unroll]] for (uint r = 0; r < NR; ++r) {
            float v = subgroupAdd(acc[r]);
            if (subgroupElect()) partial[r][gl_SubgroupID] = v;
        }
        barrier();
        if (writer) {
            uint spg = gl_NumSubgroups / GROUPS, sg0 = wgrp * spg;  // the group's subgroups
            float v = 0.0, u = 0.0;
            for (uint i = 0; i < spg; ++i) v += partial[wlt][sg0 + i];
#if defined(SWIGLU_PAIR)
            for (uint i = 0; i < spg; ++i) u += partial[ROWS + wlt][sg0 + i];
#endif
            v = row_value(v, u);
            uint row = (blk * GROUPS + wgrp) * ROWS + wlt;
            if (row < p.nrows) {
#if defined(RES_AHEAD)
                if (p.mode == 1u) v += res;
#else
                if (p.mode == 1u) v += y[p.y_off + row];
#endif
                y[p.y_off + row] = v;
            }
            vout = v;
        }
#else
        [[unroll]] for (uint r = 0; r < NR; ++r) partial[r][tid] = acc[r];
        barrier();
        for (uint s = GW / 2u; s > 0u; s >>= 1) {
            if (lt < s) {
                for (uint r = 0; r < NR; ++r) partial[r][tid] += partial[r][tid + s];
            }
            barrier();
        }
        if (lt < ROWS) {
            uint row = row0 + lt, g0 = grp * GW;
            if (row < p.nrows) {
#if defined(SWIGLU_PAIR)
                float v = row_value(partial[lt][g0], partial[ROWS + lt][g0]);
#else
                float v = row_value(partial[lt][g0], 0.0);
#endif
#if defined(RES_AHEAD)
                if (p.mode == 1u) v += res;
#else
                if (p.mode == 1u) v += y[p.y_off + row];
#endif
                y[p.y_off + row] = v;
                vout = v;
            }
        }
#endif
#if defined(X_INT8) && !defined(NORM_EPILOGUE)
#if defined(SUBGROUP)
        if (one_sg) {
            if (gl_SubgroupID == 0u) round_out_lanes(blk * GROUPS * ROWS, vout);
        } else if (ROUND_OUT != 0u) {
            round_out(blk, grp, lt, vout);
        }
#else
        if (ROUND_OUT != 0u) round_out(blk, grp, lt, vout);
#endif
#endif
    }  // row blocks
#if defined(NORM_EPILOGUE)
    norm_epilogue(min(blocks, grid));
#endif
}
