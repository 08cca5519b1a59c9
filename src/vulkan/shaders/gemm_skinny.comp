// Y = X·Wᵀ for few rows of X (a batched step's decode tokens, a short window) on KHR cooperative
// matrices: W is [N][K] Q4_K or Q6_K (WTYPE_*) in the device's tiles of 32 rows
// (weight_layout.h), X the F16 copy of the rows (f16_copy, rows of K halves), Y [M][N] F32 (row
// stride N) written or added to (mode 1). A skinny GEMM: the products are few for each weight
// read, so what bounds it is decoding the blocks and keeping enough of them in flight, not the
// matrix units.
//
// A workgroup of 128 invocations (4 subgroups of 32) takes RT tiles of 32 weight rows and 16 · MT
// rows of X (the rows past M are zeros), over one part of K (grid z: PARTS parts of whole
// blocks). K goes in stages of half a block (128 values): each stage, every invocation decodes
// its share of the weight rows' half block to F16 into shared memory (its row's fields are
// contiguous with its neighbours', as the tiled GEMV reads them) and copies its share of X's
// 128 columns; then each subgroup multiplies its 8 · RT weight rows (RT / 2 tiles of 16) by all
// of X's rows. The blocks of the stage W_AHEAD on (1 or 2) are requested before the products, so
// their loads are in flight while the matrix units work (with 2, over two stages: a workgroup
// that waits on memory every stage keeps twice the bytes in flight); with PREFETCH_X the next
// stage's rows of X too (else each stage reads them between its barriers, a wait on memory every
// stage). The parts' sums meet as the split tiles' do (gemm_split.glsl): the last part of a
// tile adds them in part order.
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint RT = 4;  // tiles of 32 weight rows a workgroup: 2 or 4
layout(constant_id = 1) const uint MT = 4;  // tiles of 16 rows of X a workgroup: 1 to 4
// 1: the next stage's rows of X (and a Q6_K block's d) are requested into registers with its
// weights, before the products, instead of read from memory between the stage's barriers.
layout(constant_id = 2) const uint PREFETCH_X = 1;
// Stages ahead the weights' blocks are requested: 1 or 2 (two sets of the fields in registers).
layout(constant_id = 3) const uint W_AHEAD = 2;
// Q4_K: 1 decodes the nibbles to halves by bit operations (a nibble q under the exponent of 1024
// is the half 1024 + q) and one F16 FMA a pair, instead of converting each value to a float,
// scaling it in F32 and packing the result (about half the instructions of the decode, which
// bounds the GEMM at 8 rows: the 9B's step read its weights at ~0.85 TB/s).
layout(constant_id = 4) const uint HALF_DECODE = 0;
const uint WG = 128u;
const uint WR = 32u * RT;        // weight rows a workgroup
const uint XR = 16u * MT;        // rows of X a workgroup
const uint NT = RT / 2u;         // tiles of 16 weight rows a subgroup
const uint TPR = WG / WR;        // invocations a weight row: 1 (RT 4) or 2 (RT 2)
const uint SUBS = 4u / TPR;      // 32-value sub-blocks an invocation decodes a stage
const uint LD = 128u / 8u + 1u;  // 16-byte chunks a staged row, one of padding
const uint XC = MT * 16u * 16u / WG;  // chunks of X's stage an invocation copies (2 · MT)

layout(std430, binding = 0) readonly buffer Weights4 { uvec4 wq4[]; };
layout(std430, binding = 0) readonly buffer Weights { uint wq[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
#if defined(EXPERTS)
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };  // the pairs' F32 rows
layout(std430, binding = 3) readonly buffer Route { uint route[]; };

// (gemm_experts.comp's push constants, row_bytes unused: the tiles' layout fixes a row's place.)
layout(push_constant) uniform Push {
    uint K, N;         // columns, weight rows computed (of each expert)
    uint row_bytes;
    uint x_off;        // floats, a multiple of 4
    uint y_off;        // floats
    uint k;            // experts a window row
    uint x_per_slot;   // 1: each pair reads its own row of x
    uint expert_rows;  // rows an expert holds in the stack, a multiple of 32
    uint first_row;    // the first of them read, a multiple of 32
    uint perm_off, tiles_off;  // words of route
} p;
#else
layout(std430, binding = 1) readonly buffer XH { uvec4 xh[]; };  // 8 halves a chunk
layout(std430, binding = 3) coherent buffer Split { uint split_u[]; };
layout(std430, binding = 4) coherent buffer SplitF { float split_f[]; };

layout(push_constant) uniform Push {
    uint M, N, K;
    uint y_off;   // floats
    uint mode;    // 0: Y = X·Wᵀ, 1: Y += X·Wᵀ
    uint splits;  // parts of K (grid z)
    uint k_part;  // blocks a part
} p;
#endif

// Staged weight rows [WR][LD] and rows of X [XR][LD], 8 halves a chunk; after the loop, the
// workgroup's sums [XR][WR] as floats in the weights' place.
shared uvec4 ws[WR * LD];
shared uvec4 xs[XR * LD];

#if defined(EXPERTS)
shared uint tile_pair[XR];  // the workgroup's pairs (past its tile's end: none)
shared uint tile_x[XR];     // where each pair's input row starts, in vec4s
#else
#include "gemm_split.glsl"
#endif

// 8 halves of v * d - m.
uvec4 pack8(vec4 a, vec4 b) {
    return uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
}

#if defined(WTYPE_Q4_K)
// A Q4_K block's 144 bytes lie as nine 16-byte fields (the header: d, dmin and the 12 bytes of
// scales and mins; then eight words of nibbles), each field of a tile's 32 rows side by side.
// Sub-block sb (32 values) is the low (sb even) or high (sb odd) nibbles of words 1 + 2 (sb / 2)
// and 2 + 2 (sb / 2); value = d · scale · q − dmin · min.
const uint NF = 1u + 2u * ((SUBS + 1u) / 2u);  // header and the nibble words of SUBS sub-blocks
#include "k4_scales.glsl"

// Field f of row lane of tile `tile`, block kb (nb blocks a row).
uint field(uint tile, uint nb, uint kb, uint lane, uint f) {
    return (tile * nb + kb) * 9u * 32u + f * 32u + lane;
}

// This invocation's raw fields of half block hb (its first sub-block sb0) of its row.
void load_stage(uint tile, uint lane, uint nb, uint hb, uint sb0, out uvec4 f[NF]) {
    uint kb = hb >> 1;
    f[0] = wq4[field(tile, nb, kb, lane, 0u)];
    [[unroll]] for (uint i = 1u; i < NF; ++i)
        f[i] = wq4[field(tile, nb, kb, lane, 1u + 2u * (sb0 >> 1) + (i - 1u))];
}

// The four values of word w's nibbles at shift sh (0: low, 4: high), in byte order, as two
// pairs of halves d · q - m.
uvec2 nibbles_half(uint w, uint sh, f16vec2 d, f16vec2 m) {
    const uint x = (w >> sh) & 0x0f0f0f0fu;
    const uint lo = (x & 0xfu) | ((x << 8) & 0xf0000u);          // q0, q1
    const uint hi = ((x >> 16) & 0xfu) | ((x >> 8) & 0xf0000u);  // q2, q3
    const f16vec2 bias = f16vec2(float16_t(1024.0));
    // (1024 + q) - 1024 is q exactly; then one rounding, in d · q - m.
    return uvec2(packFloat2x16(fma(unpackFloat2x16(lo | 0x64006400u) - bias, d, -m)),
                 packFloat2x16(fma(unpackFloat2x16(hi | 0x64006400u) - bias, d, -m)));
}

// Sub-block j of this invocation's stage (sb0 + j) as 4 chunks of 8 halves.
void decode_sub(uvec4 f[NF], uint sb0, uint j, out uvec4 o[4]) {
    uint sb = sb0 + j;
    vec2 sc, mn;
    k4_pair(f[0], sb >> 1, sc, mn);
    vec2 dm = unpackHalf2x16(f[0].x);
    float d = dm.x * ((sb & 1u) == 0u ? sc.x : sc.y), m = dm.y * ((sb & 1u) == 0u ? mn.x : mn.y);
    uint sh = (sb & 1u) * 4u;
    uint w0 = 1u + 2u * ((sb - sb0) >> 1);  // this sub-block's pair of nibble words in f
    if (HALF_DECODE != 0u) {
        const f16vec2 d2 = f16vec2(float16_t(d)), m2 = f16vec2(float16_t(m));
        [[unroll]] for (uint c = 0u; c < 4u; ++c) {
            uint a = f[w0 + (c >> 1)][(c & 1u) * 2u], b = f[w0 + (c >> 1)][(c & 1u) * 2u + 1u];
            o[c] = uvec4(nibbles_half(a, sh, d2, m2), nibbles_half(b, sh, d2, m2));
        }
        return;
    }
    [[unroll]] for (uint c = 0u; c < 4u; ++c) {
        uint a = f[w0 + (c >> 1)][(c & 1u) * 2u], b = f[w0 + (c >> 1)][(c & 1u) * 2u + 1u];
        vec4 va = vec4(uvec4(a, a >> 8, a >> 16, a >> 24) >> sh & 0xfu) * d - m;
        vec4 vb = vec4(uvec4(b, b >> 8, b >> 16, b >> 24) >> sh & 0xfu) * d - m;
        o[c] = pack8(va, vb);
    }
}
#else  // WTYPE_Q6_K
// A Q6_K block's 210 bytes: eight 16-byte words of low nibbles ql, four of high bits qh, the
// sixteen scales, each field of a tile's rows side by side, then the rows' f16 d. Value 128h +
// 32k + l (half h, quarter k) is the low (k < 2) or high nibble of ql byte 64h + 32 (k & 1) + l
// with bits 2k of qh byte 32h + l on top, minus 32, times d · scale[8h + 2k + l / 16].
const uint NF = 7u;  // the half's four ql words, two qh words, the scales

void load_stage(uint tile, uint lane, uint nb, uint hb, uint sb0, out uvec4 f[NF]) {
    uint kb = hb >> 1, h = hb & 1u;
    uint chunk = (tile * nb + kb) * 210u * 32u;  // bytes
    uint base = chunk / 16u + lane;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) f[i] = wq4[base + (4u * h + i) * 32u];
    [[unroll]] for (uint i = 0u; i < 2u; ++i) f[4u + i] = wq4[base + (8u + 2u * h + i) * 32u];
    f[6] = wq4[base + 12u * 32u];
}

float q6_d(uint tile, uint lane, uint nb, uint hb) {
    uint db = (tile * nb + (hb >> 1)) * 210u * 32u + 208u * 32u + 2u * lane;
    return unpackHalf2x16((wq[db >> 2] >> (8u * (db & 2u))) & 0xffffu).x;
}

void decode_sub(uvec4 f[NF], float d, uint hb, uint k, out uvec4 o[4]) {
    uint h = hb & 1u;
    uint sh = (k >> 1) * 4u, qsh = 2u * k;
    uint is = 8u * h + 2u * k;
    float s0 = d * float(bitfieldExtract(int(f[6][is >> 2]), int(8u * (is & 3u)), 8));
    float s1 = d * float(bitfieldExtract(int(f[6][(is + 1u) >> 2]), int(8u * ((is + 1u) & 3u)), 8));
    [[unroll]] for (uint c = 0u; c < 4u; ++c) {
        // Values 8c .. 8c + 7 of the sub-block: ql bytes 32 (k & 1) + 8c .. (two words of field
        // 2 (k & 1) + c / 2), qh bytes 8c .. of the half's 32.
        uint qw = 2u * (k & 1u) + (c >> 1), e = (c & 1u) * 2u;
        uint qa = f[qw][e], qb = f[qw][e + 1u];
        uint ha = f[4u + (c >> 1)][e], hbw = f[4u + (c >> 1)][e + 1u];
        ivec4 la = ivec4((uvec4(qa, qa >> 8, qa >> 16, qa >> 24) >> sh & 0xfu) |
                         ((uvec4(ha, ha >> 8, ha >> 16, ha >> 24) >> qsh & 3u) << 4)) - 32;
        ivec4 lb = ivec4((uvec4(qb, qb >> 8, qb >> 16, qb >> 24) >> sh & 0xfu) |
                         ((uvec4(hbw, hbw >> 8, hbw >> 16, hbw >> 24) >> qsh & 3u) << 4)) - 32;
        float s = c < 2u ? s0 : s1;
        o[c] = pack8(vec4(la) * s, vec4(lb) * s);
    }
}
#endif

#if defined(EXPERTS)
// Chunk c (8 columns) of the workgroup's pair m's input in X's stage of half block hb, as
// halves; zero past the tile's pairs.
uvec4 x_chunk(uint m0, uint hb, uint m, uint c) {
    if (tile_pair[m] == 0xffffffffu) return uvec4(0u);
    const uint o = tile_x[m] + (hb * 128u + 8u * c) / 4u;
    return pack8(x4[o], x4[o + 1u]);
}
#else
// Chunk c (8 columns) of row m of X's stage of half block hb, zero past M.
uvec4 x_chunk(uint m0, uint hb, uint m, uint c) {
    return m0 + m < p.M ? xh[((m0 + m) * p.K + hb * 128u) / 8u + c] : uvec4(0u);
}
#endif

// This invocation's chunks of X's stage of half block hb: chunk t + j · WG of the stage's
// XR · 16 (row i / 16, chunk i % 16).
void load_x(uint m0, uint hb, out uvec4 xr[XC]) {
    [[unroll]] for (uint j = 0u; j < XC; ++j) {
        const uint i = gl_LocalInvocationID.x + j * WG;
        xr[j] = x_chunk(m0, hb, i / 16u, i % 16u);
    }
}

// The workgroup's place, set once by main(): its first weight row n0 and row of X m0; this
// invocation's weight row (r, lane of tile `tile`), the first sub-block of the half it decodes,
// its subgroup; the part's first block kb0 of nb and its stages.
uint t, n0, m0, nb, kb0, stages, r, tile, lane, sb_in_half, sg;
#define Acc coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

// Requests stage s's fields of this invocation's row into f (nothing past the part's stages).
void request_w(uint s, inout uvec4 f[NF]) {
    if (s >= stages) return;
    const uint hb = 2u * kb0 + s;
    load_stage(tile, lane, nb, hb, 4u * (hb & 1u) + sb_in_half, f);
}

// Requests stage s's chunks of X (and a Q6_K block's d) into registers (PREFETCH_X).
void request_x(uint s, inout uvec4 xr[XC], inout float d6) {
    if (s >= stages) return;
    load_x(m0, 2u * kb0 + s, xr);
#if defined(WTYPE_Q6_K)
    d6 = q6_d(tile, lane, nb, 2u * kb0 + s);
#endif
}

// Stage s: decodes f (the stage's fields) into ws and X's rows into xs, then requests stage
// s + W_AHEAD's fields into f (and, PREFETCH_X, the next stage's X into xr) and adds the
// stage's products to acc while they are in flight.
void run_stage(uint s, inout uvec4 f[NF], inout uvec4 xr[XC], inout float d6,
               inout Acc acc[MT][NT]) {
    const uint hb = 2u * kb0 + s;
    barrier();  // the products of the stage before are done with ws and xs
#if defined(WTYPE_Q6_K)
    if (PREFETCH_X == 0u) d6 = q6_d(tile, lane, nb, hb);
#endif
    [[unroll]] for (uint j = 0u; j < SUBS; ++j) {
        uvec4 o[4];
#if defined(WTYPE_Q4_K)
        decode_sub(f, 4u * (hb & 1u) + sb_in_half, j, o);
#else
        decode_sub(f, d6, hb, sb_in_half + j, o);
#endif
        const uint c0 = 4u * (sb_in_half + j);
        [[unroll]] for (uint c = 0u; c < 4u; ++c) ws[r * LD + c0 + c] = o[c];
    }
    // X's rows, 16 chunks of 8 columns each (zeros past M): requested a stage ahead, or now.
    if (PREFETCH_X == 0u) load_x(m0, hb, xr);
    [[unroll]] for (uint j = 0u; j < XC; ++j) {
        const uint i = t + j * WG;
        xs[(i / 16u) * LD + i % 16u] = xr[j];
    }
    barrier();
    request_w(s + W_AHEAD, f);
    if (PREFETCH_X != 0u) request_x(s + 1u, xr, d6);
    [[unroll]] for (uint k = 0u; k < 128u; k += 16u) {
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a[MT];
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b[NT];
        [[unroll]] for (uint i = 0u; i < MT; ++i)
            coopMatLoad(a[i], xs, 16u * i * LD + k / 8u, LD, gl_CooperativeMatrixLayoutRowMajor);
        [[unroll]] for (uint j = 0u; j < NT; ++j)
            coopMatLoad(b[j], ws, (16u * (sg * NT + j)) * LD + k / 8u, LD,
                        gl_CooperativeMatrixLayoutColumnMajor);
        [[unroll]] for (uint i = 0u; i < MT; ++i)
            [[unroll]] for (uint j = 0u; j < NT; ++j)
                acc[i][j] = coopMatMulAdd(a[i], b[j], acc[i][j]);
    }
}

void main() {
    t = gl_LocalInvocationID.x;
    n0 = gl_WorkGroupID.x * WR;
    r = t % WR;
    const uint part = t / WR;
    nb = p.K / 256u;
#if defined(EXPERTS)
    const uint y_tile = gl_WorkGroupID.y;
    if (y_tile >= route[p.tiles_off]) return;  // past the table: the whole workgroup leaves
    const uint expert = route[p.tiles_off + 1u + 3u * y_tile];
    const uint first = route[p.tiles_off + 2u + 3u * y_tile] + gl_WorkGroupID.z * XR;
    const uint end = route[p.tiles_off + 3u + 3u * y_tile];
    if (first >= end) return;  // the tile's pairs end before this workgroup's
    if (t < XR) {
        const uint at = first + t;
        const uint pr = at < end ? route[p.perm_off + at] : 0xffffffffu;
        tile_pair[t] = pr;
        tile_x[t] = pr == 0xffffffffu
                        ? 0u
                        : (p.x_off + (p.x_per_slot != 0u ? pr : pr / p.k) * p.K) / 4u;
    }
    barrier();
    m0 = 0u;
    kb0 = 0u;
    stages = 2u * nb;
    // The expert's first tile of the rows read, then this invocation's among them (rows past
    // N: its last tile's, read and never stored).
    tile = (expert * p.expert_rows + p.first_row) / 32u +
           min((n0 + r) / 32u, (p.N + 31u) / 32u - 1u);
#else
    m0 = gl_WorkGroupID.y * XR;
    const uint z = gl_WorkGroupID.z;
    kb0 = z * p.k_part;
    stages = 2u * (min(nb, kb0 + p.k_part) - kb0);
    // (Rows past N: the last tile's rows, read and never stored.)
    tile = min((n0 + r) / 32u, (p.N + 31u) / 32u - 1u);
#endif
    lane = (n0 + r) & 31u;
    sb_in_half = part * SUBS;
    sg = gl_SubgroupID;

    Acc acc[MT][NT];
    [[unroll]] for (uint i = 0u; i < MT; ++i)
        [[unroll]] for (uint j = 0u; j < NT; ++j) acc[i][j] = Acc(0.0);

    uvec4 f[NF], f2[NF];  // the fields of stage s, and (W_AHEAD 2) of stage s + 1
    uvec4 xr[XC];         // PREFETCH_X: the stage's chunks of X, as this invocation copies them
    float d6 = 0.0;       // Q6_K, PREFETCH_X: the stage's block's d
    request_w(0u, f);
    if (PREFETCH_X != 0u) request_x(0u, xr, d6);
    if (W_AHEAD == 1u) {
        for (uint s = 0u; s < stages; ++s) run_stage(s, f, xr, d6, acc);
    } else {
        request_w(1u, f2);
        // Two stages a trip, each refilling its own fields two stages on.
        for (uint s = 0u; s < stages; s += 2u) {
            run_stage(s, f, xr, d6, acc);
            if (s + 1u < stages) run_stage(s + 1u, f2, xr, d6, acc);
        }
    }

    // The workgroup's sums [XR][WR] as floats in ws (4 a chunk; WR / 4 chunks a row).
    barrier();
    [[unroll]] for (uint i = 0u; i < MT; ++i)
        [[unroll]] for (uint j = 0u; j < NT; ++j)
            coopMatStore(acc[i][j], ws, (16u * i * WR + 16u * (sg * NT + j)) / 4u, WR / 4u,
                         gl_CooperativeMatrixLayoutRowMajor);
    barrier();
    const uint elems = XR * WR;
#if defined(EXPERTS)
    for (uint e = t; e < elems; e += WG) {
        const uint m = e / WR, n = e % WR, pr = tile_pair[m];
        if (pr != 0xffffffffu && n0 + n < p.N)
            y[p.y_off + pr * p.N + n0 + n] = uintBitsToFloat(ws[e / 4u][e % 4u]);
    }
#else
    const uint tile_id = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (p.splits > 1u) {
        for (uint e = t; e < elems; e += WG)
            split_f[split_part(tile_id, z, elems) + e] = uintBitsToFloat(ws[e / 4u][e % 4u]);
        if (!split_last(tile_id)) return;
    }
    for (uint e = t; e < elems; e += WG) {
        uint m = e / WR, n = e % WR;
        if (m0 + m >= p.M || n0 + n >= p.N) continue;
        float v;
        if (p.splits > 1u) {
            v = 0.0;
            for (uint q = 0u; q < p.splits; ++q) v += split_f[split_part(tile_id, q, elems) + e];
        } else {
            v = uintBitsToFloat(ws[e / 4u][e % 4u]);
        }
        uint o = p.y_off + (m0 + m) * p.N + n0 + n;
        if (p.mode == 1u) v += y[o];
        y[o] = v;
    }
#endif
}
