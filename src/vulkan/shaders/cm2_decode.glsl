// The decode functions of the NV cooperative matrix 2 tensor loads over a weight format
// (WTYPE_* define): a reference to one block, the element's block coordinates (row, column
// block) and its coordinates inside the block (row 0, column e); each returns the element as a
// half. Values are formed in F32 and rounded once. The including shader declares the push
// constants p.K (columns) and p.row_bytes (bytes a weight row); the load's base is the matrix's
// first row (for Q4_K and Q6_K, whose rows are held in tiles, a tile's first row).

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
