// y = W·x for Q4_K or Q6_K weights (WTYPE_*) held in row tiles (the GEMV speed report's tiled
// form), over x rounded to bytes by the GEMV before it (gemv.comp XPRE's layout: the bytes, 16 a
// block, then each block's scale and scaled sum) or, under NORM_IN, over the residual stream
// before its RMSNorm.
//
// The tiled form (Kernels::tile_rows): rows in tiles of TILE; a tile's blocks of one 256-value
// column run (kb) lie together as fields of 16 bytes, each field of the TILE rows side by side.
// Q4_K: nine fields (the header, then the eight 16-byte words of nibbles). Q6_K: the eight words
// of low nibbles, the four of high bits, the sixteen scales, then the TILE f16 d side by side
// (210 · TILE bytes, as many as the blocks). So invocation lane of a tile reads its row's block
// as independent loads, each of them one contiguous TILE · 16 bytes with its neighbours: every
// load instruction of a subgroup is coalesced, every load of a run is in flight at once, and no
// row is split across invocations.
//
// A workgroup takes one tile: WG / TILE slots of TILE invocations, slot s taking the runs s,
// s + WG / TILE, ... (Q4_K: a run is a block; Q6_K: half a block, 128 values, so a thread holds
// seven loads, not thirteen); x (rounded, as much of it as the workgroup's runs meet) is copied
// to shared memory, or rounded there from the floats under NORM_IN, once the first run's loads
// are requested, and the slots' sums meet in shared memory at the end: one barrier before the
// products, one before the sum, none between runs.
#version 450

#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_integer_dot_product : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 512;
layout(constant_id = 1) const uint TILE = 32;
// The speed report's ablation: bit 1 leaves out the decode and products (the loaded words are
// only folded together; results wrong).
layout(constant_id = 2) const uint ABLATE = 0;
// 256-value column runs a row (ncols / 256): the size of the shared copy of x.
layout(constant_id = 3) const uint NB = 16;
// 1: x is the residual stream before its RMSNorm (floats at x_off, the norm weights binding 3),
// normalized and rounded by each workgroup as gemv.comp NORM_IN does, with the speed report's
// epsilon; 0: x rounded already.
layout(constant_id = 4) const uint NORM_IN = 0;
const float NORM_EPS = 1e-6;
// KSPLIT > 1 (the speed report's experiment for long rows): KSPLIT workgroups a tile, each taking
// its share of the runs, adding their rows' sums to y by atomics (mode 1 only), in whatever order
// they finish.
layout(constant_id = 5) const uint KSPLIT = 1;
const uint SLOTS = WG / TILE;

layout(std430, binding = 0) readonly buffer Weights4 { uvec4 wq4[]; };
layout(std430, binding = 0) readonly buffer Weights { uint wq[]; };
layout(std430, binding = 1) readonly buffer XQ4 { uvec4 gxq4[]; };
layout(std430, binding = 1) readonly buffer XD2 { vec2 gxd2[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(std430, binding = 2) buffer YU { uint yu[]; };
layout(std430, binding = 3) readonly buffer NormW { vec4 nin_w4[]; };

layout(push_constant) uniform Push {
    uint ncols;
    uint nrows;
    uint x_off;  // in floats: where the rounding of x starts
    uint y_off;  // in floats
    uint mode;   // 0: y = W·x, 1: y += W·x
} p;

shared uvec4 sxq[NB * 16];
shared vec2 sxd[NB * 16];
shared float red[WG];

#include "k4_scales.glsl"
#include "round_bytes.glsl"

// NORM_IN: x · w rounded by 16-value blocks into sxq / sxd, a thread a block, the sum of squares
// of x left in red (reduced by the caller's barrier and sum).
float round_x() {
    float ss = 0.0;
    for (uint e = gl_LocalInvocationID.x; e < 16u * NB; e += WG) {
        vec4 v[4];
        float amax = 0.0;
        bool finite = true;
        [[unroll]] for (uint i = 0u; i < 4u; ++i) {
            v[i] = x4[(p.x_off >> 2) + 4u * e + i];
            ss += dot(v[i], v[i]);
            v[i] *= nin_w4[4u * e + i];
            vec4 a = abs(v[i]);
            amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
            finite = finite && !any(isnan(v[i])) && !any(isinf(v[i]));
        }
        float id = round_factor(amax, finite);
        uvec4 w;
        int sum = 0;
        [[unroll]] for (uint i = 0u; i < 4u; ++i) {
            int s4;
            w[i] = round4(v[i], id, s4);
            sum += s4;
        }
        float d = amax / 127.0;
        sxq[e] = w;
        sxd[e] = vec2(d, d * float(sum));
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

void load_run(uint tile, uint nb, uint run, uint lane, out uvec4 f[NF], out uint d16) {
    uint base = (tile * nb + run) * 9u * TILE + lane;
    [[unroll]] for (uint i = 0u; i < 9u; ++i) f[i] = wq4[base + i * TILE];
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

void load_run(uint tile, uint nb, uint run, uint lane, out uvec4 f[NF], out uint d16) {
    uint kb = run >> 1, h = run & 1u;
    uint chunk = (tile * nb + kb) * 210u * TILE;  // bytes
    uint base = chunk / 16u + lane;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) f[i] = wq4[base + (4u * h + i) * TILE];
    [[unroll]] for (uint i = 0u; i < 2u; ++i) f[4u + i] = wq4[base + (8u + 2u * h + i) * TILE];
    f[6] = wq4[base + 12u * TILE];
    uint db = chunk + 208u * TILE + 2u * lane;
    d16 = (wq[db >> 2] >> (8u * (db & 2u))) & 0xffffu;
}
#endif

void main() {
    uint t = gl_LocalInvocationID.x, lane = t % TILE, slot = t / TILE;
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint grid = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
    uint tiles = (p.nrows + TILE - 1u) / TILE;
    uint nb = p.ncols / 256u, nr = nb * RUNS_A_BLOCK;
    uvec4 f[NF];
    uint d16;
    // A grid smaller than the tiles walks them (tile wg, wg + grid, ...) over the x it rounded.
    uint tile = wg, run = slot, first = 0u, last = nr;
    if (KSPLIT > 1u) {  // no walking: the grid is every tile's parts
        uint share = (nr + KSPLIT - 1u) / KSPLIT;
        tile = wg / KSPLIT;
        first = (wg % KSPLIT) * share;
        last = min(nr, first + share);
        run = first + slot;
        grid = tiles;  // one pass
    }
    if (run < last) load_run(tile, nb, run, lane, f, d16);
    float scale = 1.0;
    if (NORM_IN != 0u) {
        float part = subgroupAdd(round_x());
        if (subgroupElect()) red[gl_SubgroupID] = part;
        barrier();
        float ss = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; ++i) ss += red[i];
        scale = inversesqrt(ss / float(p.ncols) + NORM_EPS);
        barrier();  // red is the slots' sums below
    } else {
        // The x blocks of this workgroup's runs (all of x but under KSPLIT).
        uint e0 = first / RUNS_A_BLOCK * 16u, e1 = (last + RUNS_A_BLOCK - 1u) / RUNS_A_BLOCK * 16u;
        for (uint i = e0 + t; i < e1; i += WG) {
            sxq[i] = gxq4[(p.x_off >> 2) + i];
            sxd[i] = gxd2[((p.x_off + p.ncols / 4u) >> 1) + i];
        }
        barrier();
    }
    for (; tile < tiles; tile += grid) {  // (under KSPLIT, once)
        if (tile != wg && KSPLIT == 1u) {
            run = slot;
            if (run < last) load_run(tile, nb, run, lane, f, d16);
        }
        float acc = 0.0;
        while (run < last) {
            acc += run_dot(f, d16, run);
            run += SLOTS;
            if (run < last) load_run(tile, nb, run, lane, f, d16);
        }
        red[t] = acc;
        barrier();
        if (slot == 0u) {
            float s = 0.0;
            for (uint i = 0u; i < SLOTS; ++i) s += red[i * TILE + lane];
            s *= scale;
            uint row = tile * TILE + lane;
            if (row < p.nrows) {
                uint o = p.y_off + row;
                if (KSPLIT > 1u) {
                    uint old = yu[o];
                    for (;;) {
                        uint got = atomicCompSwap(yu[o], old, floatBitsToUint(uintBitsToFloat(old) + s));
                        if (got == old) break;
                        old = got;
                    }
                } else {
                    y[o] = p.mode != 0u ? y[o] + s : s;
                }
            }
        }
        barrier();  // red is rewritten by the next tile
    }
}
