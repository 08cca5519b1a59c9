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
//  - Bytes become floats through the exponent trick (0x4B000000 | q is the float 2^23 + q, exact),
//    one OR and one subtraction that also absorbs the format's offset (-8, -32, -128), instead of
//    int-to-float conversions, which NVIDIA GPUs run at a quarter of the FMA rate. Q4_K / Q5_K mins
//    are applied once per sub-block through the sum of its x values (shared by all ROWS rows).
//  - The per-row sums are combined with subgroupAdd when the SUBGROUP variant is built and the
//    device has subgroup arithmetic (no subgroup size is assumed: partials are indexed by
//    gl_SubgroupID), else by a shared-memory tree.
//  - X_INT8 (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K on devices with integer dot products): each workgroup
//    first rounds x to signed bytes with one scale per 16 values (largest magnitude -> 127) in
//    shared memory, and the weight bytes meet x in 4-way packed integer dot products: one
//    instruction where the float path spends about a dozen (unpack, convert, four FMAs) on four
//    weights, which is what bounds the float path on a fast GPU. A 32-value slice is then two
//    or three loads, the nibble masks, eight dot products and a few float scalings per row.
//    The per-block sums of the rounded x stand in for sums of x (Q4_K / Q5_K mins, the Q4_0 and
//    Q6_K offsets). The rounding is the activation quantization the CPU chain's dot products
//    use, in blocks half as long (the CPU chain's are 32 values); the error it adds is a
//    fraction of a percent of |x| per value. Four adjacent invocations round a block where
//    subgroups allow (quantize_x_lanes), so the reads of x are contiguous. Blocks of 16 measured
//    faster than blocks of 32 on an H200 (tg128 in one call: 9B 329 -> 339 t/s, Qwen3-8B
//    332-340 -> 352; docs/PERF.md 2026-12-01, afternoon).
//  - Wide slices (WIDE, X_INT8 Q4_K and Q6_K): a slice of 64 weights, so the fixed work of a
//    slice (the header or scale loads, unpacking the scales, the float terms) is paid once for
//    twice the weights; the launcher gives a thread half the rows, so it holds as many weight
//    bytes. On an H200 these GEMVs were bound by that work a slice, not by the bytes: a Q4_K
//    GEMV over 65536 rows took 65.5 -> 51.5 us (2.3 -> 2.9 TB/s).
//  - Row groups (GROUPS, X_INT8): every workgroup reads all of x, and right after a barrier
//    those reads go to the few L2 lines that hold x, from every workgroup at once; on an H200
//    that traffic, not the weights, bounded the decode GEMVs. A workgroup of GROUPS row groups
//    rounds x once for GROUPS · ROWS rows, cutting it by GROUPS (9B decode 183 -> 217 t/s at 4).
//  - Row blocks (GROUPS · ROWS rows each) may outnumber the workgroups of the grid: each
//    workgroup then takes blocks wg, wg + grid, ... over the x it rounded once, so on a grid of
//    a few workgroups a multiprocessor (the launcher's choice) the rounding of x and the
//    workgroup's launch are paid once per workgroup rather than once per block.
//  - F32 / F16 rows are cut into 32-element units, read as uvec4s when the rows start aligned;
//    a short last unit and rows of odd byte length go through unit_values(), tail guarded.
//
// The fused variants for the decode token command, where a tiny dependent dispatch costs a
// barrier's latency (~4 us on an H200) whatever its work:
//  - SWIGLU_PAIR: the FFN gate and up projections in one dispatch, y = silu(gate·x) · (up·x).
//    Both matrices lie in the bound weight view (at byte offsets g_off and u_off); a workgroup
//    takes ROWS rows of each, so every x slice it reads serves 2·ROWS rows, and the SwiGLU
//    needs no stage of its own.
//  - NORM_EPILOGUE: the RMSNorm of the new y (the residual stream after mode 1) into
//    y[xn_off ..] with the weights of binding 3, so the next norm needs no stage of its own.
//    Each workgroup, once its rows are stored and made available device-wide, counts itself on
//    counter[counter_idx] (binding 4); the last one to arrive sees every row, normalizes them
//    all, and sets the counter back to 0 for the next dispatch. y is `coherent` in this variant
//    so the last workgroup reads the other workgroups' rows, not a stale cache line.
//  - NORM_IN (X_INT8): x is the residual stream before its RMSNorm, the norm weights are binding
//    3, and each workgroup normalizes x as it rounds it, so the GEMV before needs no epilogue and
//    no workgroup waits for all the others. The bytes are rounded from x · w (the rounding is
//    blind to a common factor: 127 / max |x · w| · x · w is the same for x · s · w), the sum of
//    squares of x is reduced at the rounding's barrier, and each row's sum is multiplied by
//    1 / sqrt(mean(x²) + eps) before it is stored.
//  - ROUND_OUT (X_INT8): the GEMV also writes its rows rounded to bytes, the way a GEMV that
//    reads them would round them (quantize_x), at y[xr_off ..]. XPRE: x_off points at such a
//    rounding instead of at floats, so the GEMV has no rounding pass. The token command's FFN
//    pair rounds its rows for the down projection, whose 12288 values of x (a 9B's) cost every
//    workgroup 48 KB of reads and a barrier to round: on an H200 the down stage went 569 -> 503
//    us a 9B token, the pair 757 -> 788 (docs/PERF.md 2026-12-01, 21:00). A rounding of n
//    values at float offset o: the bytes in words o .. o + n/4 - 1 (16-value block e in words
//    o + 4e .. o + 4e + 3), then each block's (scale, scale · sum of its bytes) from o + n/4:
//    3n/8 floats, the bytes and terms the reader would have rounded itself.
//  - GATED_IN (X_INT8): x is a Gated DeltaNet layer's output before its gated RMSNorm, as the
//    decode step left it (deltanet_step.comp NORM_OUT): x = o · w · silu(z), and the sum of
//    squares of o of each group of a head's value columns at float gin_off of x's binding
//    ([head][GIN_G]). A 16-value block lies in one head; its rounding is blind to the head's
//    factor 1 / sqrt(mean(o²) + eps), so the factor scales the block's scale and scaled sum.
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
// see the top).
layout(constant_id = 9) const uint XPRE = 0;
// X_INT8 without NORM_EPILOGUE: 1 rounds the rows stored to bytes at y[xr_off ..] (see the
// top). The row blocks (GROUPS · ROWS rows) are whole 16-value blocks (the launcher checks).
layout(constant_id = 10) const uint ROUND_OUT = 0;
// GATED_IN: the value head size and the column groups a head (see the top); the epsilon is
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

// Bytes of a word as exact floats minus `bias`, through the exponent trick (see the top).
const float MAGIC = 8388608.0;
vec4 bytes_f(uint w, float bias) {
    uvec4 b = (uvec4(w, w >> 8, w >> 16, w >> 24) & 0xffu) | 0x4B000000u;
    return uintBitsToFloat(b) - (MAGIC + bias);
}

#if !defined(WTYPE_F32) && !defined(WTYPE_F16)
// Element (relative to the row) of x that xv[i] of slice `part` of block `blk` starts at.
uint slice_x(uint blk, uint part, uint i) {
#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
    // Nibble chunk part (16 bytes) holds sub-block 2j (low nibbles) and 2j+1 (high nibbles),
    // elements 16*(part&1) .. +15 of each.
    return blk * 256u + 64u * (part >> 1) + 16u * (part & 1u) + 32u * (i >> 2) + 4u * (i & 3u);
#elif defined(WTYPE_Q6_K)
    // Quarters c and c + 2 of half h (part = 4h + 2c + f), values 16f .. 16f + 15 of each.
    return blk * 256u + 128u * (part >> 2) + 16u * (part & 3u) + 64u * (i >> 2) + 4u * (i & 3u);
#else
    return blk * 32u + 4u * i;
#endif
}
#endif

#if defined(WTYPE_Q6_K)
// Slice part = 4h + 2c + f of block blk of the Q6_K row with handle rb (tiled_rows.glsl): bytes
// 32c + 16f .. +15 of the half's 64 bytes of low nibbles, which hold
// values l = 16f .. 16f + 15 of quarters c (low nibbles) and c + 2 (high nibbles), and the 16
// bytes of high bits of those l. v[0] and v[1] are the two quarters' 6-bit values, four a word;
// sc their scales; d the block's.
void q6_slice(uint rb, uint blk, uint part, out uvec4 v[2], out vec2 sc, out float d) {
    uint h = part >> 2, c = (part >> 1) & 1u, f = part & 1u;
    uint o_ql = tiled_byte(rb, blk, 210u, 16u * part);
    uint o_qh = tiled_byte(rb, blk, 210u, 128u + 32u * h + 16u * f);
    uint o_sc = tiled_byte(rb, blk, 210u, 192u + 8u * h);
    // The scales are two word loads: as one 8-byte load the 248k-row head GEMV took 20 % longer
    // on an H200.
    uvec4 ql = load16(o_ql), qh = load16(o_qh);
    uvec2 s = uvec2(wq[o_sc >> 2], wq[(o_sc >> 2) + 1u]);
    d = w_f16(tiled_byte(rb, blk, 210u, 208u));
    v[0] = (ql & 0x0f0f0f0fu) | (((qh >> (2u * c)) & 0x03030303u) << 4);
    v[1] = ((ql >> 4) & 0x0f0f0f0fu) | (((qh >> (2u * c + 4u)) & 0x03030303u) << 4);
    // Scales 8h + 2c + f and 8h + 2(c + 2) + f: byte 2c + f of each word of the half's eight.
    int sh = int(8u * (2u * c + f));
    sc = vec2(bitfieldExtract(int(s.x), sh, 8), bitfieldExtract(int(s.y), sh, 8));
}
#endif

#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K)
#include "k4_scales.glsl"
#endif

#if defined(WTYPE_Q4_K)
float slice_dot(uint rb, uint blk, uint part, vec4 xv[8], vec2 xs) {
    uvec4 hd = load16(tiled_byte(rb, blk, 144u, 0u));
    uvec4 q = load16(tiled_byte(rb, blk, 144u, 16u + 16u * part));
    vec2 sc, mn;
    k4_pair(hd, part >> 1, sc, mn);
    float lo = 0.0, hi = 0.0;
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        lo += dot(bytes_f(q[i] & 0x0f0f0f0fu, 0.0), xv[i]);
        hi += dot(bytes_f((q[i] >> 4) & 0x0f0f0f0fu, 0.0), xv[4u + i]);
    }
    vec2 dm = unpackHalf2x16(hd.x);
    return dm.x * (sc.x * lo + sc.y * hi) - dm.y * dot(mn, xs);
}
#elif defined(WTYPE_Q5_K)
float slice_dot(uint rb, uint blk, uint part, vec4 xv[8], vec2 xs) {
    uint b = rb + blk * 176u;
    uvec4 hd = load16(b);
    uvec4 qh = load16(b + 16u + 16u * (part & 1u));  // fifth bits of elements l = 16*(part&1)..
    uvec4 q = load16(b + 48u + 16u * part);
    uint j = part >> 1;
    vec2 sc, mn;
    k4_pair(hd, j, sc, mn);
    float lo = 0.0, hi = 0.0;
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        uint h0 = ((qh[i] >> (2u * j)) & 0x01010101u) << 4;
        uint h1 = ((qh[i] >> (2u * j + 1u)) & 0x01010101u) << 4;
        lo += dot(bytes_f((q[i] & 0x0f0f0f0fu) | h0, 0.0), xv[i]);
        hi += dot(bytes_f(((q[i] >> 4) & 0x0f0f0f0fu) | h1, 0.0), xv[4u + i]);
    }
    vec2 dm = unpackHalf2x16(hd.x);
    return dm.x * (sc.x * lo + sc.y * hi) - dm.y * dot(mn, xs);
}
#elif defined(WTYPE_Q6_K)
float slice_dot(uint rb, uint blk, uint part, vec4 xv[8], vec2 xs) {
    uvec4 v[2];
    vec2 sc;
    float d;
    q6_slice(rb, blk, part, v, sc, d);
    float lo = 0.0, hi = 0.0;
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        lo += dot(bytes_f(v[0][i], 32.0), xv[i]);
        hi += dot(bytes_f(v[1][i], 32.0), xv[4u + i]);
    }
    return d * (sc.x * lo + sc.y * hi);
}
#elif defined(WTYPE_Q8_0)
float slice_dot(uint rb, uint blk, uint part, vec4 xv[8], vec2 xs) {
    uint b = rb + blk * 34u;
    uvec4 q0 = load16_a2(b + 2u), q1 = load16_a2(b + 18u);
    float acc = 0.0;
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        // Signed bytes, flipped to unsigned (+128) and unbiased by the conversion.
        acc += dot(bytes_f(q0[i] ^ 0x80808080u, 128.0), xv[i]);
        acc += dot(bytes_f(q1[i] ^ 0x80808080u, 128.0), xv[4u + i]);
    }
    return w_f16(b) * acc;
}
#elif defined(WTYPE_Q4_0)
float slice_dot(uint rb, uint blk, uint part, vec4 xv[8], vec2 xs) {
    uint b = rb + blk * 18u;
    uvec4 q = load16_a2(b + 2u);
    float acc = 0.0;
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        acc += dot(bytes_f(q[i] & 0x0f0f0f0fu, 8.0), xv[i]);
        acc += dot(bytes_f((q[i] >> 4) & 0x0f0f0f0fu, 8.0), xv[4u + i]);
    }
    return w_f16(b) * acc;
}
#endif

#if defined(X_INT8)
// x rounded to signed bytes (see the top) in blocks of 16 values: block e (values 16e ..
// 16e + 15) is xq[e], four values a word, with xd[e] = (its scale, scale · the sum of its
// rounded values). Each 16-value run a slice meets has its own scale.
shared uvec4 xq[2u * XBLOCKS];
shared vec2 xd[2u * XBLOCKS];
#if defined(NORM_IN)
// Partial sums of squares of x, one a subgroup (SUBGROUP; else reduced into xss[0]). Read where
// the rows are stored rather than held in a register across the row loop: one register more put
// the FFN pair's variant past 64, and its workgroups from two a multiprocessor to one.
shared float xss[WG];

// The factor of every row's sum, 1 / sqrt(mean(x²) + eps) (rms_norm.comp's formula).
float norm_in_scale() {
    if ((ABLATE & 5u) != 0u) return 1.0;  // the ablations leave the sums unwritten
#if defined(SUBGROUP)
    float total = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; ++i) total += xss[i];
#else
    float total = xss[0];
#endif
    return inversesqrt(total / float(p.ncols) + NORM_EPS);
}
#endif

#if defined(GATED_IN)
// The gated norm's factor of the head that 16-value block e of x lies in (see the top).
float gin_factor(uint e) {
    uint h = 16u * e / GIN_DV;
    float ss = 0.0;
    for (uint g = 0; g < GIN_G; ++g) ss += x[p.gin_off + h * GIN_G + g];
    return inversesqrt(ss / float(GIN_DV) + NORM_EPS);
}
#endif

#if defined(SUBGROUP)
#define ROUND_LANES  // quantize_x_lanes
#endif
#include "round_bytes.glsl"

#if defined(SUBGROUP)
// quantize_x where subgroups hold 4+ invocations: four adjacent ones round a block, four values
// each, their largest magnitude and sums combined by shuffles. The workgroup's reads of x (and
// of the norm weights) are then contiguous 16-byte loads, a few cache lines an instruction;
// with a thread a block, each load instruction of a subgroup of 32 touched 32 lines. On an
// H200 the Qwen3.5-9B token went 3213 -> 3089 us (projection stage 692 -> 627).
void quantize_x_lanes() {
    uint lane = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#if defined(NORM_IN)
    float ss = 0.0;
#endif
    // Value quad i is values 4i .. 4i + 3: quad j = i % 4 of block i / 4.
    for (uint i = lane; i < 8u * XBLOCKS; i += WG) {
        vec4 v = xload4(4u * i);
#if defined(GATED_IN)
        float gf = gin_factor(i >> 2);
#endif
#if defined(NORM_IN)
        ss += dot(v, v);
        v *= nin_w4[i];
#endif
        float d;
        int sum;
        uint e = i >> 2, j = i & 3u;
        xq[e][j] = round_quad_lanes(v, d, sum);
#if defined(GATED_IN)
        d *= gf;
#endif
        if (j == 0u) xd[e] = vec2(d, d * float(sum));
    }
#if defined(NORM_IN)
    ss = subgroupAdd(ss);
    if (subgroupElect()) xss[gl_SubgroupID] = ss;
#endif
    barrier();
}
#endif

void quantize_x() {
    if ((ABLATE & 4u) != 0u) return;
    if (XPRE != 0u) return;  // x is rounded already
    if ((ABLATE & 1u) != 0u) {
        for (uint e = gl_LocalInvocationID.x; e < 2u * XBLOCKS; e += WG) {
            xq[e] = uvec4(0x01010101u);
            xd[e] = vec2(1.0, 16.0);
        }
        barrier();
        return;
    }
#if defined(SUBGROUP)
    if (gl_SubgroupSize >= 4u) {
        quantize_x_lanes();
        return;
    }
#endif
#if defined(NORM_IN)
    float ss = 0.0;  // this thread's sum of squares of x
#endif
    for (uint e = gl_LocalInvocationID.x; e < 2u * XBLOCKS; e += WG) {
        vec4 v[4];
        [[unroll]] for (uint i = 0; i < 4u; ++i) {
            v[i] = xload4(16u * e + 4u * i);
#if defined(NORM_IN)
            ss += dot(v[i], v[i]);
            v[i] *= nin_w4[4u * e + i];
#endif
        }
        float d;
        int s0;
        xq[e] = round16(v, d, s0);
#if defined(GATED_IN)
        d *= gin_factor(e);
#endif
        xd[e] = vec2(d, d * float(s0));
    }
#if defined(NORM_IN)
    uint tid = gl_LocalInvocationID.x;
#if defined(SUBGROUP)
    ss = subgroupAdd(ss);
    if (subgroupElect()) xss[gl_SubgroupID] = ss;
    barrier();
#else
    xss[tid] = ss;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) xss[tid] += xss[tid + s];
        barrier();
    }
#endif
#else
    barrier();
#endif
}

// Block e of the rounded x (its bytes; its scale and scaled sum): from shared memory, or under
// XPRE from the rounding the GEMV before wrote (see the top).
uvec4 xq_at(uint e) { return XPRE != 0u ? gxq4[(p.x_off >> 2) + e] : xq[e]; }
vec2 xd_at(uint e) { return XPRE != 0u ? gxd2[((p.x_off + p.ncols / 4u) >> 1) + e] : xd[e]; }

// The 32 rounded x values a slice meets, two 16-value blocks (a: the first, b: the other, in the
// order the slice's weight words meet them), with f = (a's scale, b's, a's scaled sum, b's). A
// WIDE slice meets four: a, a2 (the 32 values of one run) and b, b2, with f their four scales and
// g their four scaled sums.
struct XSlice {
    uvec4 a, b, a2, b2;
    vec4 f, g;
};

XSlice x_slice(uint blk, uint part) {
    XSlice x;
    if ((ABLATE & 4u) != 0u) {
        x.a = x.b = x.a2 = x.b2 = uvec4(0x01010101u);
        x.f = vec4(1.0, 1.0, 16.0, 16.0);
        x.g = vec4(16.0);
        return x;
    }
    // Indices below are of 32-value runs (bi, bj); run b holds 16-value blocks 2b and 2b + 1.
#if defined(WTYPE_Q4_K) || defined(WTYPE_Q6_K)
    if (WIDE != 0u) {
        // Q4_K: sub-blocks 2·part and 2·part + 1; Q6_K: quarters c and c + 2 of half h (part =
        // 2h + c). All 32 values of each.
#if defined(WTYPE_Q6_K)
        uint bi = blk * 8u + 4u * (part >> 1) + (part & 1u), bj = bi + 2u;
#else
        uint bi = blk * 8u + 2u * part, bj = bi + 1u;
#endif
        x.a = xq_at(2u * bi);
        x.a2 = xq_at(2u * bi + 1u);
        x.b = xq_at(2u * bj);
        x.b2 = xq_at(2u * bj + 1u);
        vec2 da = xd_at(2u * bi), da2 = xd_at(2u * bi + 1u);
        vec2 db = xd_at(2u * bj), db2 = xd_at(2u * bj + 1u);
        x.f = vec4(da.x, da2.x, db.x, db2.x);
        x.g = vec4(da.y, da2.y, db.y, db2.y);
        return x;
    }
#endif
#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K) || defined(WTYPE_Q6_K)
    // Q4_K / Q5_K: sub-blocks 2j and 2j+1 (j = part/2); Q6_K: quarters c and c + 2 of half h
    // (part = 4h + 2c + f). Values 16f .. 16f + 15 of each (f = part&1).
    uint f = part & 1u;
#if defined(WTYPE_Q6_K)
    uint bi = blk * 8u + (part & 4u) + ((part >> 1) & 1u), bj = bi + 2u;
#else
    uint bi = blk * 8u + (part & 6u), bj = bi + 1u;
#endif
    x.a = xq_at(2u * bi + f);
    x.b = xq_at(2u * bj + f);
    vec2 da = xd_at(2u * bi + f), db = xd_at(2u * bj + f);
#else  // Q4_0, Q8_0: the block's 32 values
    x.a = xq_at(2u * blk);
    x.b = xq_at(2u * blk + 1u);
    vec2 da = xd_at(2u * blk), db = xd_at(2u * blk + 1u);
#endif
    x.f = vec4(da.x, db.x, da.y, db.y);
    return x;
}

#if defined(WTYPE_Q4_K)
float slice_dot_i8(uint rb, uint blk, uint part, XSlice x) {
    uvec4 hd = load16(tiled_byte(rb, blk, 144u, 0u));
    vec2 sc, mn;
    int lo = 0, hi = 0;
    if (WIDE != 0u) {
        // Bytes 32·part .. +31 of the nibbles: sub-block 2·part (low) and 2·part + 1 (high).
        uvec4 q0 = load16(tiled_byte(rb, blk, 144u, 16u + 32u * part));
        uvec4 q1 = load16(tiled_byte(rb, blk, 144u, 32u + 32u * part));
        k4_pair(hd, part, sc, mn);
        int lo2 = 0, hi2 = 0;
        [[unroll]] for (uint i = 0; i < 4u; ++i) {
            lo += dot4(q0[i] & 0x0f0f0f0fu, x.a[i]);
            lo2 += dot4(q1[i] & 0x0f0f0f0fu, x.a2[i]);
            hi += dot4((q0[i] >> 4) & 0x0f0f0f0fu, x.b[i]);
            hi2 += dot4((q1[i] >> 4) & 0x0f0f0f0fu, x.b2[i]);
        }
        vec2 dm = unpackHalf2x16(hd.x);
        return dm.x * (sc.x * (x.f.x * float(lo) + x.f.y * float(lo2)) +
                       sc.y * (x.f.z * float(hi) + x.f.w * float(hi2))) -
               dm.y * dot(mn, vec2(x.g.x + x.g.y, x.g.z + x.g.w));
    }
    uvec4 q = load16(tiled_byte(rb, blk, 144u, 16u + 16u * part));
    k4_pair(hd, part >> 1, sc, mn);
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        lo += dot4(q[i] & 0x0f0f0f0fu, x.a[i]);
        hi += dot4((q[i] >> 4) & 0x0f0f0f0fu, x.b[i]);
    }
    vec2 dm = unpackHalf2x16(hd.x);
    return dm.x * (sc.x * x.f.x * float(lo) + sc.y * x.f.y * float(hi)) - dm.y * dot(mn, x.f.zw);
}
#elif defined(WTYPE_Q5_K)
float slice_dot_i8(uint rb, uint blk, uint part, XSlice x) {
    uint b = rb + blk * 176u;
    uvec4 hd = load16(b);
    uvec4 qh = load16(b + 16u + 16u * (part & 1u));
    uvec4 q = load16(b + 48u + 16u * part);
    uint j = part >> 1;
    vec2 sc, mn;
    k4_pair(hd, j, sc, mn);
    int lo = 0, hi = 0;
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        uint h0 = ((qh[i] >> (2u * j)) & 0x01010101u) << 4;
        uint h1 = ((qh[i] >> (2u * j + 1u)) & 0x01010101u) << 4;
        lo += dot4((q[i] & 0x0f0f0f0fu) | h0, x.a[i]);
        hi += dot4(((q[i] >> 4) & 0x0f0f0f0fu) | h1, x.b[i]);
    }
    vec2 dm = unpackHalf2x16(hd.x);
    return dm.x * (sc.x * x.f.x * float(lo) + sc.y * x.f.y * float(hi)) - dm.y * dot(mn, x.f.zw);
}
#elif defined(WTYPE_Q6_K)
// WIDE slice part = 2h + c of block blk (see q6_slice): bytes 32c .. 32c + 31 of the half's low
// nibbles and all 32 bytes of its high bits. v: quarter c's values 0-15, 16-31, then quarter
// c + 2's; sc their four scales.
void q6_slice_wide(uint rb, uint blk, uint part, out uvec4 v[4], out vec4 sc, out float d) {
    uint h = part >> 1, c = part & 1u;
    uvec4 ql0 = load16(tiled_byte(rb, blk, 210u, 32u * part));
    uvec4 ql1 = load16(tiled_byte(rb, blk, 210u, 32u * part + 16u));
    uvec4 qh0 = load16(tiled_byte(rb, blk, 210u, 128u + 32u * h));
    uvec4 qh1 = load16(tiled_byte(rb, blk, 210u, 144u + 32u * h));
    uint o_sc = tiled_byte(rb, blk, 210u, 192u + 8u * h);
    uvec2 s = uvec2(wq[o_sc >> 2], wq[(o_sc >> 2) + 1u]);
    d = w_f16(tiled_byte(rb, blk, 210u, 208u));
    v[0] = (ql0 & 0x0f0f0f0fu) | (((qh0 >> (2u * c)) & 0x03030303u) << 4);
    v[1] = (ql1 & 0x0f0f0f0fu) | (((qh1 >> (2u * c)) & 0x03030303u) << 4);
    v[2] = ((ql0 >> 4) & 0x0f0f0f0fu) | (((qh0 >> (2u * c + 4u)) & 0x03030303u) << 4);
    v[3] = ((ql1 >> 4) & 0x0f0f0f0fu) | (((qh1 >> (2u * c + 4u)) & 0x03030303u) << 4);
    // Scales 8h + 2c + f (word s.x) and 8h + 2(c + 2) + f (s.y): bytes 2c and 2c + 1.
    int sh = int(16u * c);
    sc = vec4(bitfieldExtract(int(s.x), sh, 8), bitfieldExtract(int(s.x), sh + 8, 8),
              bitfieldExtract(int(s.y), sh, 8), bitfieldExtract(int(s.y), sh + 8, 8));
}

float slice_dot_i8(uint rb, uint blk, uint part, XSlice x) {
    if (WIDE != 0u) {
        uvec4 v[4];
        vec4 sc;
        float d;
        q6_slice_wide(rb, blk, part, v, sc, d);
        int l0 = 0, l1 = 0, h0 = 0, h1 = 0;
        [[unroll]] for (uint i = 0; i < 4u; ++i) {
            l0 += dot4(v[0][i], x.a[i]);
            l1 += dot4(v[1][i], x.a2[i]);
            h0 += dot4(v[2][i], x.b[i]);
            h1 += dot4(v[3][i], x.b2[i]);
        }
        vec4 dots = vec4(x.f.x * float(l0), x.f.y * float(l1), x.f.z * float(h0), x.f.w * float(h1));
        return d * dot(sc, dots - 32.0 * x.g);
    }
    uvec4 v[2];
    vec2 sc;
    float d;
    q6_slice(rb, blk, part, v, sc, d);
    int lo = 0, hi = 0;
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        lo += dot4(v[0][i], x.a[i]);
        hi += dot4(v[1][i], x.b[i]);
    }
    // The -32 of every value through the sums of the rounded x halves.
    return d * (sc.x * (x.f.x * float(lo) - 32.0 * x.f.z) + sc.y * (x.f.y * float(hi) - 32.0 * x.f.w));
}
#elif defined(WTYPE_Q8_0)
float slice_dot_i8(uint rb, uint blk, uint part, XSlice x) {
    uint b = rb + blk * 34u;
    uvec4 q0 = load16_a2(b + 2u), q1 = load16_a2(b + 18u);
    int s0 = 0, s1 = 0;
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        s0 += dot4(q0[i], x.a[i]);
        s1 += dot4(q1[i], x.b[i]);
    }
    return w_f16(b) * (x.f.x * float(s0) + x.f.y * float(s1));
}
#elif defined(WTYPE_Q4_0)
float slice_dot_i8(uint rb, uint blk, uint part, XSlice x) {
    uint b = rb + blk * 18u;
    uvec4 q = load16_a2(b + 2u);
    int s0 = 0, s1 = 0;
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        s0 += dot4(q[i] & 0x0f0f0f0fu, x.a[i]);
        s1 += dot4((q[i] >> 4) & 0x0f0f0f0fu, x.b[i]);
    }
    return w_f16(b) * (x.f.x * float(s0) + x.f.y * float(s1) - 8.0 * (x.f.z + x.f.w));
}
#endif
#endif  // X_INT8

#if defined(WTYPE_F32)
// Unit u (32 floats) of a row whose start is aligned for load16.
float unit_dot(uint rb, uint u, vec4 xv[8]) {
    float acc = 0.0;
    [[unroll]] for (uint i = 0; i < 8u; ++i)
        acc += dot(uintBitsToFloat(load16(rb + 128u * u + 16u * i)), xv[i]);
    return acc;
}
#elif defined(WTYPE_F16)
float unit_dot(uint rb, uint u, vec4 xv[8]) {
    float acc = 0.0;
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        uvec4 w = load16(rb + 64u * u + 16u * i);
        acc += dot(vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)), xv[2u * i]);
        acc += dot(vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w)), xv[2u * i + 1u]);
    }
    return acc;
}
#endif

// Per-thread (shared tree) or per-subgroup (SUBGROUP; at most WG subgroups) partial sums.
shared float partial[NR][WG];

#if defined(NORM_EPILOGUE)
shared uint last_group;  // 1 in the workgroup that finished last
// 8 loads a thread cover the 4096 rows of a 9B's residual stream over 512 threads, and hold half
// the registers 16 did: at 16 the compiler gave the 12288-wide Q4_K variant 65 registers, one
// over what fits two workgroups of 512 a multiprocessor (H200, docs/PERF.md 2026-11-30, night).
const uint NORM_BATCH = 8u;

// The sum of v over the workgroup, through the same partials as the row sums.
float group_sum(float v) {
    uint tid = gl_LocalInvocationID.x;
#if defined(SUBGROUP)
    v = subgroupAdd(v);
    if (subgroupElect()) partial[0][gl_SubgroupID] = v;
    barrier();
    float s = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; ++i) s += partial[0][i];
    return s;
#else
    partial[0][tid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) partial[0][tid] += partial[0][tid + s];
        barrier();
    }
    return partial[0][0];
#endif
}

// Values base, base + WG, ... (NORM_BATCH of them) of y and of the norm weights; 0 past the rows.
void load_norm_batch(uint base, out float v[NORM_BATCH], out float w[NORM_BATCH]) {
    [[unroll]] for (uint k = 0; k < NORM_BATCH; ++k) {
        uint i = base + k * WG;
        v[k] = i < p.nrows ? y[p.y_off + i] : 0.0;
        w[k] = i < p.nrows ? norm_w[i] : 0.0;
    }
}

void store_norm_batch(uint base, float v[NORM_BATCH], float w[NORM_BATCH], float scale) {
    [[unroll]] for (uint k = 0; k < NORM_BATCH; ++k) {
        uint i = base + k * WG;
        if (i < p.nrows) y[p.xn_off + i] = v[k] * scale * w[k];
    }
}

// Called by every thread of a workgroup that stored its rows (see the top); `groups` workgroups
// count themselves (those of the grid's overshoot left at the top without counting).
void norm_epilogue(uint groups) {
    uint tid = gl_LocalInvocationID.x;
    // Release: the rows this group's threads stored reach device scope before it counts itself.
    memoryBarrierBuffer();
    barrier();
    if (tid == 0u) last_group = atomicAdd(counter[p.counter_idx], 1u) == groups - 1u ? 1u : 0u;
    barrier();
    if (last_group == 0u) return;
    // Acquire: every other group's rows were released before its increment, which came before
    // ours; reads of the coherent y after this fence see them.
    memoryBarrierBuffer();
    // One workgroup reads all of y, so the loads go out in batches of NORM_BATCH independent
    // ones, a memory latency a batch instead of one a value. Where y fits one batch a thread
    // (4096 values over 512 threads for a 9B), the batch loaded for the sum of squares, weights
    // included, is the one scaled and stored: one memory latency in all.
    float v[NORM_BATCH], w[NORM_BATCH];
    float ss = 0.0;
    for (uint base = tid; base < p.nrows; base += NORM_BATCH * WG) {
        load_norm_batch(base, v, w);
        [[unroll]] for (uint k = 0; k < NORM_BATCH; ++k) ss += v[k] * v[k];
    }
    // rms_norm.comp's formula: y / sqrt(mean(y²) + eps) · w.
    float scale = inversesqrt(group_sum(ss) / float(p.nrows) + p.eps);
    if (p.nrows <= NORM_BATCH * WG) {
        store_norm_batch(tid, v, w, scale);
    } else {
        for (uint base = tid; base < p.nrows; base += NORM_BATCH * WG) {
            load_norm_batch(base, v, w);
            store_norm_batch(base, v, w, scale);
        }
    }
    // The next dispatch that counts on this word comes after a pipeline barrier.
    if (tid == 0u) atomicExchange(counter[p.counter_idx], 0u);
}
#endif

// A row's value from its sums (v; u: the up row's, SWIGLU_PAIR): times NORM_IN's factor, through
// the SwiGLU for the pair.
float row_value(float v, float u) {
#if defined(NORM_IN)
    float xs = norm_in_scale();
    v *= xs;
    u *= xs;
#endif
#if defined(SWIGLU_PAIR)
    return v / (1.0 + exp(-v)) * u;  // swiglu.comp's formula
#else
    return v;
#endif
}

#if defined(X_INT8) && !defined(NORM_EPILOGUE)
// ROUND_OUT: the row block's values, gathered for the threads that round them where one
// subgroup does not hold the whole block (round_out). Sized 1 where ROUND_OUT is 0.
shared float ro_v[GROUPS * ROWS * ROUND_OUT + 1u];

#if defined(SUBGROUP)
// ROUND_OUT where subgroups hold 16+ invocations: invocation i < GROUPS · ROWS (counted by
// subgroup) rounds v, row i of the block that starts at row `first`, the 16 of a 16-value block
// combined by shuffles.
void round_out_lanes(uint first, float v) {
    uint i = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    if (i >= GROUPS * ROWS) return;  // whole 16-value blocks stay together
    uint e = (first + i) / 16u, j = i & 15u;
    float amax = abs(v);
    uint bad = isnan(v) || isinf(v) ? 1u : 0u;
    [[unroll]] for (uint m = 1u; m < 16u; m <<= 1) {
        amax = max(amax, subgroupShuffleXor(amax, m));
        bad |= subgroupShuffleXor(bad, m);
    }
    float id = round_factor(amax, bad == 0u);
    int q = int(roundEven(v * id)), sum = q;
    uint w = (uint(q) & 0xffu) << (8u * (j & 3u));
    [[unroll]] for (uint m = 1u; m < 16u; m <<= 1) sum += subgroupShuffleXor(sum, m);
    w |= subgroupShuffleXor(w, 1u);
    w |= subgroupShuffleXor(w, 2u);
    if (16u * e >= p.nrows) return;
    uint o = p.xr_off, n = p.nrows;
    if ((j & 3u) == 0u) yw[o + 4u * e + j / 4u] = w;
    if (j == 0u) {
        float d = amax / 127.0;
        y[o + n / 4u + 2u * e] = d;
        y[o + n / 4u + 2u * e + 1u] = d * float(sum);
    }
}
#endif

// ROUND_OUT: rounds the rows of row block blk (v: the value of row grp · ROWS + lt of the block,
// from the threads with lt < ROWS) as quantize_x rounds x, into y[xr_off ..] (see the top): 16
// invocations a 16-value block by shuffles where subgroups hold 16+, else one thread a block.
// Called by every thread of the workgroup.
void round_out(uint blk, uint grp, uint lt, float v) {
    uint first = blk * GROUPS * ROWS;
    if (lt < ROWS) ro_v[grp * ROWS + lt] = v;
    barrier();
#if defined(SUBGROUP)
    if (gl_SubgroupSize >= 16u) {
        uint i = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
        round_out_lanes(first, i < GROUPS * ROWS ? ro_v[i] : 0.0);
        return;
    }
#endif
    uint b = gl_LocalInvocationID.x, e = first / 16u + b;
    if (b >= GROUPS * ROWS / 16u || 16u * e >= p.nrows) return;
    vec4 vb[4];
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        uint j = 16u * b + 4u * i;
        vb[i] = vec4(ro_v[j], ro_v[j + 1u], ro_v[j + 2u], ro_v[j + 3u]);
    }
    float d;
    int s0;
    uvec4 w = round16(vb, d, s0);
    uint o = p.xr_off, n = p.nrows;
    [[unroll]] for (uint i = 0; i < 4u; ++i) yw[o + 4u * e + i] = w[i];
    y[o + n / 4u + 2u * e] = d;
    y[o + n / 4u + 2u * e + 1u] = d * float(s0);
}
#endif

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
