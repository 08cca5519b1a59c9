// gemv.comp's slice products over x as floats: slice_dot() of a slice of 32 weights of each
// block format (slice_x: the x values it meets), unit_dot() of 32 values of F32 / F16 rows;
// slice_values(), the slice's weights as floats for a caller that multiplies them into several
// vectors (gemv_batch.comp).
//
// Bytes become floats through the exponent trick (0x4B000000 | q is the float 2^23 + q, exact),
// one OR and one subtraction that also absorbs the format's offset (-8, -32, -128), instead of
// int-to-float conversions, which NVIDIA GPUs run at a quarter of the FMA rate. Q4_K / Q5_K mins
// are applied once per sub-block through the sum of its x values (shared by all ROWS rows).
//
// F32 / F16 rows are cut into 32-element units, read as uvec4s when the rows start aligned;
// a short last unit and rows of odd byte length go through unit_values(), tail guarded.

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
// The slice's 32 weights as floats, w[i] meeting xv[i] of slice_dot (mins applied).
void slice_values(uint rb, uint blk, uint part, out vec4 w[8]) {
    uvec4 hd = load16(tiled_byte(rb, blk, 144u, 0u));
    uvec4 q = load16(tiled_byte(rb, blk, 144u, 16u + 16u * part));
    vec2 sc, mn;
    k4_pair(hd, part >> 1, sc, mn);
    vec2 dm = unpackHalf2x16(hd.x);
    vec2 s = dm.x * sc, m = dm.y * mn;
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        w[i] = bytes_f(q[i] & 0x0f0f0f0fu, 0.0) * s.x - m.x;
        w[4u + i] = bytes_f((q[i] >> 4) & 0x0f0f0f0fu, 0.0) * s.y - m.y;
    }
}
#elif defined(WTYPE_Q5_K)
// Slice part of block blk of the Q5_K row at byte rb: the block's header (d, dmin, scales),
// the fifth bits of elements l = 16·(part & 1) .. of its sub-blocks, and the slice's nibbles.
void q5_slice(uint rb, uint blk, uint part, out uvec4 hd, out uvec4 qh, out uvec4 q) {
    uint b = rb + blk * 176u;
    hd = load16(b);
    qh = load16(b + 16u + 16u * (part & 1u));
    q = load16(b + 48u + 16u * part);
}
float slice_dot(uint rb, uint blk, uint part, vec4 xv[8], vec2 xs) {
    uvec4 hd, qh, q;
    q5_slice(rb, blk, part, hd, qh, q);
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
void slice_values(uint rb, uint blk, uint part, out vec4 w[8]) {
    uvec4 hd, qh, q;
    q5_slice(rb, blk, part, hd, qh, q);
    uint j = part >> 1;
    vec2 sc, mn;
    k4_pair(hd, j, sc, mn);
    vec2 dm = unpackHalf2x16(hd.x);
    vec2 s = dm.x * sc, m = dm.y * mn;
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        uint h0 = ((qh[i] >> (2u * j)) & 0x01010101u) << 4;
        uint h1 = ((qh[i] >> (2u * j + 1u)) & 0x01010101u) << 4;
        w[i] = bytes_f((q[i] & 0x0f0f0f0fu) | h0, 0.0) * s.x - m.x;
        w[4u + i] = bytes_f(((q[i] >> 4) & 0x0f0f0f0fu) | h1, 0.0) * s.y - m.y;
    }
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
void slice_values(uint rb, uint blk, uint part, out vec4 w[8]) {
    uvec4 v[2];
    vec2 sc;
    float d;
    q6_slice(rb, blk, part, v, sc, d);
    vec2 s = d * sc;
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        w[i] = bytes_f(v[0][i], 32.0) * s.x;
        w[4u + i] = bytes_f(v[1][i], 32.0) * s.y;
    }
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
void slice_values(uint rb, uint blk, uint part, out vec4 w[8]) {
    uint b = rb + blk * 34u;
    uvec4 q0 = load16_a2(b + 2u), q1 = load16_a2(b + 18u);
    float d = w_f16(b);
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        w[i] = bytes_f(q0[i] ^ 0x80808080u, 128.0) * d;
        w[4u + i] = bytes_f(q1[i] ^ 0x80808080u, 128.0) * d;
    }
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
void slice_values(uint rb, uint blk, uint part, out vec4 w[8]) {
    uint b = rb + blk * 18u;
    uvec4 q = load16_a2(b + 2u);
    float d = w_f16(b);
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        w[i] = bytes_f(q[i] & 0x0f0f0f0fu, 8.0) * d;
        w[4u + i] = bytes_f((q[i] >> 4) & 0x0f0f0f0fu, 8.0) * d;
    }
}
#endif

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
