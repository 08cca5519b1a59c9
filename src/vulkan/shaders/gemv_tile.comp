// y = W·x for Q4_K or Q6_K weights (WTYPE_*) held in row tiles (weight_layout.h, the device's
// layout of these formats with TILE = 32; the speed report also lays out other tile sizes,
// Kernels::tile_rows), batch 1. The decode token command's GEMV over these formats where the
// device has integer dot products, subgroup arithmetic and shuffles (Kernels::gemv_record).
//
// The tiled form: rows in tiles of TILE; a tile's blocks of one 256-value column run (kb) lie
// together as fields of 16 bytes, each field of the TILE rows side by side. Q4_K: nine fields
// (the header, then the eight 16-byte words of nibbles). Q6_K: the eight words of low nibbles,
// the four of high bits, the sixteen scales, then the TILE f16 d side by side (210 · TILE
// bytes, as many as the blocks). So invocation lane of a tile reads its row's block as
// independent loads, each of them one contiguous TILE · 16 bytes with its neighbours: every
// load instruction of a subgroup is coalesced, every load of a run is in flight at once, and no
// row is split across invocations.
//
// A workgroup takes one tile: WG / TILE slots of TILE invocations, slot s taking the runs s,
// s + WG / TILE, ... (Q4_K: a run is a block; Q6_K: half a block, 128 values, so a thread holds
// seven loads, not thirteen); x is made ready in shared memory (XMODE, below) once the first
// run's loads are requested, and the slots' sums meet in shared memory at the end: one barrier
// before the products, one before the sum, none between runs.
//
// x (XMODE), always as gemv.comp's X_INT8 path has it, rounded to signed bytes by 16-value
// blocks with the same rounding (round_bytes.glsl), so the two kernels compute the same sums:
//  0: rounded already by the GEMV before (gemv.comp XPRE's layout: the bytes, 16 a block, then
//     each block's scale and scaled sum), copied to shared memory;
//  1: the residual stream before its RMSNorm (gemv.comp NORM_IN; the norm weights binding 3),
//     normalized and rounded by each workgroup;
//  2: floats, rounded by each workgroup;
//  3: a Gated DeltaNet layer's output before its gated norm (gemv.comp GATED_IN);
//  4: the residual stream before its RMSNorm, rounded already times the norm weights by the GEMV
//     that wrote it (ROUND_NORM), with each block's sum of squares after the rounding: the
//     rounding is blind to the norm's common factor, which is taken from the sums here;
//  5: a Gated DeltaNet layer's output before its gated norm, rounded already by the step
//     (deltanet_step.comp NORM_OUT 2; the layout of 0), each block's scale times its head's
//     factor as under 3; with gin_off ~0u no factor: x as under 0, in this pipeline (another
//     mixer's output read in the DeltaNet output projection's form, Kernels::GemvGatedIn).
// Four adjacent invocations of a subgroup round a block, combined by shuffles (round_quad_lanes;
// the launcher requires subgroups of 4+).
//
// The fused forms of the token command: PAIR, the FFN gate and up matrices (at byte offsets
// g_off and u_off of the view, multiples of 32) and the SwiGLU, half the slots on each matrix:
// y = silu(G·x) · (U·x); ROUND_OUT, the rows also written rounded as a GEMV that reads them
// under XMODE 0 takes them (at float xr_off of y's binding; whole 16-row blocks); with
// ROUND_NORM, the rows times the next RMSNorm's weights (binding 3), each block's sum of squares
// of the rows after the scales, for a reader under XMODE 4 (Kernels::normed_rounding_floats).
#version 450

#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_integer_dot_product : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 512;
layout(constant_id = 1) const uint TILE = 32;
// The speed report's ablation: bit 1 leaves out the decode and products (the loaded words are
// only folded together; results wrong).
layout(constant_id = 2) const uint ABLATE = 0;
// 256-value column runs a row (ncols / 256): the size of the shared copy of x.
layout(constant_id = 3) const uint NB = 16;
// How x comes (see the top).
layout(constant_id = 4) const uint XMODE = 0;
// KSPLIT > 1: KSPLIT workgroups a tile, each taking its share of the runs (short GEMVs, whose
// tiles are fewer than the device's multiprocessors); the last to finish adds the parts' sums
// in part order (binding 4).
layout(constant_id = 5) const uint KSPLIT = 1;
// XMODE 1, 3 and 4: the norm's epsilon.
layout(constant_id = 6) const float NORM_EPS = 1e-6;
layout(constant_id = 7) const uint PAIR = 0;
layout(constant_id = 8) const uint ROUND_OUT = 0;
// XMODE 3 and 5: the value head size and the column groups of a head whose sums of squares lie
// at gin_off (gemv.comp GATED_IN).
layout(constant_id = 9) const uint GIN_DV = 128;
layout(constant_id = 10) const uint GIN_G = 1;
layout(constant_id = 11) const uint ROUND_NORM = 0;
// Rows of a tile of the weights' layout (0: TILE). A workgroup takes TILE of them, a part of a
// layout tile when TILE is less: its loads then cover TILE · 16 contiguous bytes.
layout(constant_id = 12) const uint LAYOUT_TILE = 0;
const uint LTILE = LAYOUT_TILE != 0u ? LAYOUT_TILE : TILE;
const uint SUB = LTILE / TILE;  // workgroup tiles a layout tile
const uint SLOTS = WG / TILE;
// Slots a matrix: a pair's gate rows take the first half, its up rows the second.
const uint MSLOTS = PAIR != 0u ? SLOTS / 2u : SLOTS;
// XMODE 4: the loads a thread makes of the blocks' sums of squares.
const uint SSQ_LOADS = (NB * 16u + WG - 1u) / WG;

layout(std430, binding = 0) readonly buffer Weights4 { uvec4 wq4[]; };
layout(std430, binding = 0) readonly buffer Weights { uint wq[]; };
layout(std430, binding = 1) readonly buffer XQ4 { uvec4 gxq4[]; };
layout(std430, binding = 1) readonly buffer XD2 { vec2 gxd2[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(std430, binding = 2) buffer YU { uint yu[]; };
layout(std430, binding = 3) readonly buffer NormW { vec4 nin_w4[]; };
layout(std430, binding = 3) readonly buffer NormW1 { float nin_w[]; };
// KSPLIT: a word a tile counting its parts that finished (0 between dispatches), then each
// tile's parts' sums of its rows, from word `tiles`.
layout(std430, binding = 4) coherent buffer Split { uint split_u[]; };
layout(std430, binding = 4) coherent buffer SplitF { float split_f[]; };

layout(push_constant) uniform Push {
    uint ncols;
    uint nrows;
    uint x_off;  // in floats: where x (or its rounding) starts
    uint y_off;  // in floats
    uint mode;   // 0: y = W·x, 1: y += W·x
    uint g_off;  // bytes: where the matrix (a pair's gate matrix) starts in the view
    uint u_off;  // PAIR: where the up matrix starts
    uint xr_off;   // ROUND_OUT: where the rounding of y goes, in floats
    uint gin_off;  // XMODE 3, 5: the column groups' sums of squares, in floats of the x binding
                   // (XMODE 5: ~0u, none)
} p;

shared uvec4 sxq[NB * 16];
shared vec2 sxd[NB * 16];
shared float red[WG];

#include "k4_scales.glsl"
#define ROUND_LANES  // round_x
#include "round_bytes.glsl"

// XMODE 3 and 5: the gated norm's factor of the head that 16-value block e of x lies in.
float gin_factor(uint e) {
    uint h = 16u * e / GIN_DV;
    float ss = 0.0;
    for (uint g = 0u; g < GIN_G; ++g) ss += x[p.gin_off + h * GIN_G + g];
    return inversesqrt(ss / float(GIN_DV) + NORM_EPS);
}

// XMODE 1-3: x (times the norm weights under XMODE 1) rounded by 16-value blocks into sxq /
// sxd, four invocations of a subgroup a block, a quad of values each; returns this thread's sum
// of squares of x (XMODE 1).
float round_x() {
    uint lane = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    float ss = 0.0;
    for (uint i = lane; i < 64u * NB; i += WG) {
        vec4 v = x4[(p.x_off >> 2) + i];
        if (XMODE == 1u) {
            ss += dot(v, v);
            v *= nin_w4[i];
        }
        float d;
        int sum;
        uint e = i >> 2, j = i & 3u;
        sxq[e][j] = round_quad_lanes(v, d, sum);
        if (XMODE == 3u) d *= gin_factor(e);
        if (j == 0u) sxd[e] = vec2(d, d * float(sum));
    }
    return ss;
}

#if defined(WTYPE_Q4_K)
const uint NF = 9u;  // loads a run
const uint RUNS_A_BLOCK = 1u;
// One row's block of column run kb (its nine fields in f) against x.
float run_dot(uvec4 f[NF], uint d16, uint kb) {
    if ((ABLATE & 2u) != 0u) {
        uvec4 a = f[0];
        [[unroll]] for (uint i = 1u; i < NF; ++i) a ^= f[i];
        return float((a.x ^ a.y ^ a.z ^ a.w) & 1u);
    }
    uvec4 hd = f[0];
    float s = 0.0, m = 0.0;
    [[unroll]] for (uint j = 0u; j < 4u; ++j) {
        // Nibble words 2j and 2j + 1 (values 0-15 and 16-31 of sub-blocks 2j, low nibbles, and
        // 2j + 1, high): x blocks e, e + 1 (low) and e + 2, e + 3 (high).
        uvec4 qa = f[1u + 2u * j], qb = f[2u + 2u * j];
        uint e = kb * 16u + 4u * j;
        uvec4 x0 = sxq[e], x1 = sxq[e + 1u], x2 = sxq[e + 2u], x3 = sxq[e + 3u];
        int l0 = 0, l1 = 0, h0 = 0, h1 = 0;
        [[unroll]] for (uint i = 0u; i < 4u; ++i) {
            l0 += dot4(qa[i] & 0x0f0f0f0fu, x0[i]);
            l1 += dot4(qb[i] & 0x0f0f0f0fu, x1[i]);
            h0 += dot4((qa[i] >> 4) & 0x0f0f0f0fu, x2[i]);
            h1 += dot4((qb[i] >> 4) & 0x0f0f0f0fu, x3[i]);
        }
        vec2 d0 = sxd[e], d1 = sxd[e + 1u], d2 = sxd[e + 2u], d3 = sxd[e + 3u];
        vec2 sc, mn;
        k4_pair(hd, j, sc, mn);
        s += sc.x * (d0.x * float(l0) + d1.x * float(l1)) +
             sc.y * (d2.x * float(h0) + d3.x * float(h1));
        m += mn.x * (d0.y + d1.y) + mn.y * (d2.y + d3.y);
    }
    vec2 dm = unpackHalf2x16(hd.x);
    return dm.x * s - dm.y * m;
}

// Run `run` of row lane of tile `tile` of the matrix at 16-byte word m16 of the view.
void load_run(uint m16, uint tile, uint nb, uint run, uint lane, out uvec4 f[NF], out uint d16) {
    uint base = m16 + (tile / SUB * nb + run) * 9u * LTILE + tile % SUB * TILE + lane;
    [[unroll]] for (uint i = 0u; i < 9u; ++i) f[i] = wq4[base + i * LTILE];
    d16 = 0u;
}
#else  // WTYPE_Q6_K
const uint NF = 7u;  // four words of low nibbles, two of high bits, the scales (and d apart)
const uint RUNS_A_BLOCK = 2u;
// Half h = run & 1 of a row's block kb = run / 2: values 128h .. 128h + 127.
float run_dot(uvec4 f[NF], uint d16, uint run) {
    uint kb = run >> 1, h = run & 1u;
    if ((ABLATE & 2u) != 0u) {
        uvec4 a = f[0];
        [[unroll]] for (uint i = 1u; i < NF; ++i) a ^= f[i];
        return float((a.x ^ a.y ^ a.z ^ a.w ^ d16) & 1u);
    }
    float s = 0.0;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        // Low-nibble word i: bytes 64h + 16i .. + 15 of ql, low nibbles values 16i + (0..15) of
        // the half, high nibbles 64 + 16i + (0..15); their two high bits in qh word i & 1, at
        // bits 2 (i >> 1) and 4 + 2 (i >> 1).
        uvec4 ql = f[i], qh = f[4u + (i & 1u)];
        uint sh = 2u * (i >> 1);
        uint e = kb * 16u + 8u * h + i;
        uvec4 xa = sxq[e], xb = sxq[e + 4u];
        int lo = 0, hi = 0;
        [[unroll]] for (uint c = 0u; c < 4u; ++c) {
            lo += dot4((ql[c] & 0x0f0f0f0fu) | (((qh[c] >> sh) & 0x03030303u) << 4), xa[c]);
            hi += dot4(((ql[c] >> 4) & 0x0f0f0f0fu) | (((qh[c] >> (sh + 4u)) & 0x03030303u) << 4),
                       xb[c]);
        }
        vec2 da = sxd[e], db = sxd[e + 4u];
        // The 16 signed scales: a's is number 8h + i, b's 8h + 4 + i.
        uint ia = 8u * h + i, ib = ia + 4u;
        float sa = float(bitfieldExtract(int(f[6][ia >> 2]), int(8u * (ia & 3u)), 8));
        float sb = float(bitfieldExtract(int(f[6][ib >> 2]), int(8u * (ib & 3u)), 8));
        s += sa * (da.x * float(lo) - 32.0 * da.y) + sb * (db.x * float(hi) - 32.0 * db.y);
    }
    return unpackHalf2x16(d16).x * s;
}

void load_run(uint m16, uint tile, uint nb, uint run, uint lane, out uvec4 f[NF], out uint d16) {
    uint kb = run >> 1, h = run & 1u;
    uint chunk = 16u * m16 + (tile / SUB * nb + kb) * 210u * LTILE;  // bytes
    uint l = tile % SUB * TILE + lane;  // the row's place in its layout tile
    uint base = chunk / 16u + l;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) f[i] = wq4[base + (4u * h + i) * LTILE];
    [[unroll]] for (uint i = 0u; i < 2u; ++i) f[4u + i] = wq4[base + (8u + 2u * h + i) * LTILE];
    f[6] = wq4[base + 12u * LTILE];
    uint db = chunk + 208u * LTILE + 2u * l;
    d16 = (wq[db >> 2] >> (8u * (db & 2u))) & 0xffffu;
}
#endif

// ROUND_OUT: shared copy of the tile's stored rows.
shared float rov[TILE];
shared uint last_part;  // KSPLIT: 1 in the tile's last part to finish

// ROUND_OUT: the tile's rows in rov rounded as gemv.comp's round_out rounds them, one thread a
// 16-value block, into y[xr_off ..]: block e's bytes in words xr_off + 4e .. + 3, its scale and
// scaled sum at xr_off + nrows / 4 + 2e.
void round_out(uint tile, uint t) {
    uint e = (tile * TILE) / 16u + t;
    if (t >= TILE / 16u || 16u * e >= p.nrows) return;
    float ss = 0.0;
    vec4 vb[4];
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        uint j = 16u * t + 4u * i;
        vb[i] = vec4(rov[j], rov[j + 1u], rov[j + 2u], rov[j + 3u]);
        if (ROUND_NORM != 0u) {
            ss += dot(vb[i], vb[i]);
            uint w = 16u * e + 4u * i;
            vb[i] *= vec4(nin_w[w], nin_w[w + 1u], nin_w[w + 2u], nin_w[w + 3u]);
        }
    }
    float d;
    int s0;
    uvec4 w = round16(vb, d, s0);
    uint o = p.xr_off, n = p.nrows;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) yu[o + 4u * e + i] = w[i];
    y[o + n / 4u + 2u * e] = d;
    y[o + n / 4u + 2u * e + 1u] = d * float(s0);
    if (ROUND_NORM != 0u) y[o + n / 4u + n / 8u + e] = ss;
}

// ROUND_OUT where subgroups hold 16+ invocations: each slot-0 lane rounds v, the value of its
// row, with the other 15 of its 16-row block by shuffles (no barrier, no shared memory); nw is
// the row's next norm weight under ROUND_NORM. The same bytes as round_out; the block's sum of
// squares is added in another order.
void round_out_lanes(uint row, uint lane, float v, float nw) {
    uint e = row / 16u, j = lane & 15u;
    float xv = ROUND_NORM != 0u ? v * nw : v, ss = v * v;
    float amax = abs(xv);
    uint bad = isnan(xv) || isinf(xv) ? 1u : 0u;
    [[unroll]] for (uint m = 1u; m < 16u; m <<= 1) {
        amax = max(amax, subgroupShuffleXor(amax, m));
        bad |= subgroupShuffleXor(bad, m);
        ss += subgroupShuffleXor(ss, m);
    }
    float id = round_factor(amax, bad == 0u);
    int q = int(roundEven(xv * id)), sum = q;
    uint w = (uint(q) & 0xffu) << (8u * (j & 3u));
    [[unroll]] for (uint m = 1u; m < 16u; m <<= 1) sum += subgroupShuffleXor(sum, m);
    w |= subgroupShuffleXor(w, 1u);
    w |= subgroupShuffleXor(w, 2u);
    if (16u * e >= p.nrows) return;
    uint o = p.xr_off, n = p.nrows;
    if ((j & 3u) == 0u) yu[o + 4u * e + j / 4u] = w;
    if (j == 0u) {
        float d = amax / 127.0;
        y[o + n / 4u + 2u * e] = d;
        y[o + n / 4u + 2u * e + 1u] = d * float(sum);
        if (ROUND_NORM != 0u) y[o + n / 4u + n / 8u + e] = ss;
    }
}

void main() {
    // Invocations counted by subgroup, so a slot's TILE lanes lie in whole subgroups in order
    // where subgroups hold up to TILE (round_out_lanes).
    uint t = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    uint lane = t % TILE, slot = t / TILE;
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint grid = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
    uint tiles = (p.nrows + TILE - 1u) / TILE;
    uint nb = p.ncols / 256u, nr = nb * RUNS_A_BLOCK;
    // This slot's matrix (a pair's gate or up rows) and its place among the matrix's slots.
    uint mslot = slot % MSLOTS;
    uint m16 = (slot < MSLOTS ? p.g_off : p.u_off) >> 4;
    uvec4 f[NF];
    uint d16;
    // A grid smaller than the tiles walks them (tile wg, wg + grid, ...) over the x it rounded.
    uint tile = wg, run = mslot, first = 0u, last = nr;
    if (KSPLIT > 1u) {  // no walking: the grid is every tile's parts
        uint share = (nr + KSPLIT - 1u) / KSPLIT;
        tile = wg / KSPLIT;
        first = (wg % KSPLIT) * share;
        last = min(nr, first + share);
        run = first + mslot;
        grid = tiles;  // one pass
    }
    if (run < last) load_run(m16, tile, nb, run, lane, f, d16);
    float scale = 1.0;
    if (XMODE >= 1u && XMODE <= 3u) {
        float part = subgroupAdd(round_x());
        if (XMODE == 1u && subgroupElect()) red[gl_SubgroupID] = part;
        barrier();
        if (XMODE == 1u) {
            float ss = 0.0;
            for (uint i = 0u; i < gl_NumSubgroups; ++i) ss += red[i];
            scale = inversesqrt(ss / float(p.ncols) + NORM_EPS);
            barrier();  // red is the slots' sums below
        }
    } else {
        // XMODE 4: the blocks' sums of squares (NB · 16 of them) requested before the copy of x,
        // so both wait on the L2 together; summed after it.
        float ssq[SSQ_LOADS];
        if (XMODE == 4u) {
            uint o = p.x_off + p.ncols / 4u + p.ncols / 8u;
            [[unroll]] for (uint k = 0u; k < SSQ_LOADS; ++k) {
                uint i = t + k * WG;
                ssq[k] = i < NB * 16u ? x[o + i] : 0.0;
            }
        }
        // The x blocks of this workgroup's runs (all of x but under KSPLIT).
        uint e0 = first / RUNS_A_BLOCK * 16u, e1 = (last + RUNS_A_BLOCK - 1u) / RUNS_A_BLOCK * 16u;
        for (uint i = e0 + t; i < e1; i += WG) {
            sxq[i] = gxq4[(p.x_off >> 2) + i];
            vec2 d = gxd2[((p.x_off + p.ncols / 4u) >> 1) + i];
            sxd[i] = XMODE == 5u && p.gin_off != 0xffffffffu ? d * gin_factor(i) : d;
        }
        if (XMODE == 4u) {
            float part = 0.0;
            [[unroll]] for (uint k = 0u; k < SSQ_LOADS; ++k) part += ssq[k];
            part = subgroupAdd(part);
            if (subgroupElect()) red[gl_SubgroupID] = part;
        }
        barrier();
        if (XMODE == 4u) {
            float ss = 0.0;
            for (uint i = 0u; i < gl_NumSubgroups; ++i) ss += red[i];
            scale = inversesqrt(ss / float(p.ncols) + NORM_EPS);
            barrier();  // red is the slots' sums below
        }
    }
    for (; tile < tiles; tile += grid) {  // (under KSPLIT, once)
        if (tile != wg && KSPLIT == 1u) {
            run = mslot;
            if (run < last) load_run(m16, tile, nb, run, lane, f, d16);
        }
        // The slot-0 lanes' row: its residual (mode 1) and next norm weight (ROUND_NORM)
        // requested now, so their latency passes under the weights' loads.
        uint row = tile * TILE + lane;
        float res = 0.0, nw = 1.0;
        if (slot == 0u && row < p.nrows) {
            if (p.mode != 0u) res = y[p.y_off + row];
            if (ROUND_NORM != 0u) nw = nin_w[row];
        }
        float acc = 0.0;
        while (run < last) {
            acc += run_dot(f, d16, run);
            run += MSLOTS;
            if (run < last) load_run(m16, tile, nb, run, lane, f, d16);
        }
        red[t] = acc;
        barrier();
        float s = 0.0;  // the slot-0 lanes: the row's sum (this part's, under KSPLIT)
        if (slot == 0u)
            for (uint i = 0u; i < MSLOTS; ++i) s += red[i * TILE + lane];
        if (KSPLIT > 1u) {
            // Each part leaves its rows' sums in the split buffer; the last part to arrive adds
            // them in part order, so the rows do not depend on which part finished first.
            uint base = tiles + tile * KSPLIT * TILE;
            if (slot == 0u) split_f[base + (wg % KSPLIT) * TILE + lane] = s;
            memoryBarrierBuffer();
            barrier();
            if (t == 0u) last_part = atomicAdd(split_u[tile], 1u) == KSPLIT - 1u ? 1u : 0u;
            barrier();
            if (last_part == 0u) return;
            memoryBarrierBuffer();
            if (slot == 0u) {
                s = 0.0;
                for (uint k = 0u; k < KSPLIT; ++k) s += split_f[base + k * TILE + lane];
            }
            if (t == 0u) split_u[tile] = 0u;  // ready for the next dispatch
        }
        if (slot == 0u) {
            s *= scale;
            if (PAIR != 0u) {
                float u = 0.0;
                for (uint i = MSLOTS; i < SLOTS; ++i) u += red[i * TILE + lane];
                u *= scale;
                s = s / (1.0 + exp(-s)) * u;  // swiglu.comp's formula
            }
            float v = s;  // the value stored
            if (row < p.nrows) {
                if (p.mode != 0u) v += res;
                y[p.y_off + row] = v;
            }
            if (ROUND_OUT != 0u && gl_SubgroupSize >= 16u) round_out_lanes(row, lane, v, nw);
            if (ROUND_OUT != 0u && gl_SubgroupSize < 16u) rov[lane] = v;
        }
        barrier();  // red is rewritten by the next tile (and rov is read below)
        if (ROUND_OUT != 0u && gl_SubgroupSize < 16u) {
            round_out(tile, t);
            barrier();
        }
    }
}
