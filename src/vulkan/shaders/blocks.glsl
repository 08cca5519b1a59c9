// Reading GGUF weight blocks in the device's layout (weight_layout.h: GGUF rows, or tiles of rows
// for Q4_K and Q6_K) from a buffer of 32-bit words. Blocks of 18 or 34 bytes are not word
// aligned, so bytes and halves are extracted by shifts; this needs no 8- or 16-bit storage
// feature and runs on every Vulkan device. Every format is read in units of
// 32 consecutive elements, so one GEMV loop serves all of them.
//
// The including shader declares `readonly buffer ... { uint wq[]; }` before including this file.

#include "tiled_rows.glsl"

uint w_u8(uint off) { return (wq[off >> 2] >> ((off & 3u) * 8u)) & 0xffu; }
// off must be even (true for every half inside a GGUF block, as blocks have even sizes).
uint w_u16(uint off) { return (wq[off >> 2] >> ((off & 2u) * 8u)) & 0xffffu; }
float w_f16(uint off) { return unpackHalf2x16(w_u16(off)).x; }
// Four bytes at an even offset, as one little-endian word.
uint w_u32(uint off) {
    uint lo = w_u16(off);
    uint hi = w_u16(off + 2u);
    return lo | (hi << 16);
}
// 16 bytes at an even offset as little-endian words: aligned word loads joined by funnel
// shifts. It reads the word past the run only when the offset is 2 mod 4 (it then holds the
// run's last bytes), so no byte beyond the run's last word is touched.
uvec4 load16_a2(uint off) {
    uint i = off >> 2;
    uvec4 w = uvec4(wq[i], wq[i + 1u], wq[i + 2u], wq[i + 3u]);
    if ((off & 2u) == 0u) return w;
    uint w4 = wq[i + 4u];
    return (w >> 16) | (uvec4(w.yzw, w4) << 16);
}
// Signed bytes of a word.
ivec4 s8x4(uint v) { return ivec4(int(v << 24) >> 24, int(v << 16) >> 24, int(v << 8) >> 24, int(v) >> 24); }
uvec4 u8x4(uint v) { return uvec4(v & 0xffu, (v >> 8) & 0xffu, (v >> 16) & 0xffu, v >> 24); }

// The handle of row r of a matrix of rows of row_bytes bytes, which quad_values and unit_values
// take: its first byte, or for the formats the device holds in tiles (Q4_K, Q6_K) its tiled_row.
uint w_row(uint r, uint row_bytes) {
#if defined(WTYPE_Q4_K) || defined(WTYPE_Q6_K)
    return tiled_row(r, row_bytes);
#else
    return r * row_bytes;
#endif
}

// 6-bit scale and min number j (0..7) of a Q4_K / Q5_K block whose 12 scale bytes start at s.
uvec2 k4_scale_min(uint s, uint j) {
    if (j < 4u) return uvec2(w_u8(s + j) & 63u, w_u8(s + j + 4u) & 63u);
    uint a = w_u8(s + j + 4u), b = w_u8(s + j - 4u), c = w_u8(s + j);
    return uvec2((a & 0xfu) | ((b >> 6) << 4), (a >> 4) | ((c >> 6) << 4));
}

// The 4 values of quad q (elements 32u + 4q .. 32u + 4q + 3) of unit u of the row with handle
// `row` (w_row), for the format chosen by the WTYPE_* define. Reading a quad at a time lets eight
// threads share one unit (the GEMM tiles); unit_values() below reads all eight. F32/F16 rows may
// end inside a unit: their reads are clamped to the row (callers ignore values past ncols).
#if defined(WTYPE_F32)
vec4 quad_values(uint row, uint u, uint q, uint ncols) {
    uvec4 c = min(uvec4(u * 32u + 4u * q) + uvec4(0, 1, 2, 3), uvec4(ncols - 1u));
    uint r = row >> 2;
    return vec4(uintBitsToFloat(wq[r + c.x]), uintBitsToFloat(wq[r + c.y]), uintBitsToFloat(wq[r + c.z]),
                uintBitsToFloat(wq[r + c.w]));
}
#elif defined(WTYPE_F16)
vec4 quad_values(uint row, uint u, uint q, uint ncols) {
    uvec4 c = min(uvec4(u * 32u + 4u * q) + uvec4(0, 1, 2, 3), uvec4(ncols - 1u));
    return vec4(w_f16(row + 2u * c.x), w_f16(row + 2u * c.y), w_f16(row + 2u * c.z), w_f16(row + 2u * c.w));
}
#elif defined(WTYPE_Q4_0)
// block (32 elements, 18 bytes): f16 d, 16 bytes; element j is the low nibble of byte j, element
// j+16 the high one, minus 8.
vec4 quad_values(uint row, uint u, uint q, uint ncols) {
    uint b = row + u * 18u;
    uvec4 x = u8x4(w_u32(b + 2u + 4u * (q & 3u)));
    return (vec4(q < 4u ? x & 0xfu : x >> 4) - 8.0) * w_f16(b);
}
#elif defined(WTYPE_Q8_0)
// block (32 elements, 34 bytes): f16 d, 32 signed bytes.
vec4 quad_values(uint row, uint u, uint q, uint ncols) {
    uint b = row + u * 34u;
    return vec4(s8x4(w_u32(b + 2u + 4u * q))) * w_f16(b);
}
#elif defined(WTYPE_Q4_K)
// block (256 elements, 144 bytes): f16 d, f16 dmin, 12 bytes of 6-bit scales and mins (the
// header, field 0), 128 bytes of nibbles. Sub-block sb (32 elements) uses scale/min sb; its
// nibbles are the low (sb even) or high (sb odd) halves of the 32 bytes at 16 + 32*(sb/2).
// value = d*scale*q - dmin*min. Rows in tiles (tiled_rows.glsl).
vec4 quad_values(uint row, uint u, uint q, uint ncols) {
    uint b = tiled_byte(row, u >> 3, 144u, 0u);
    uint sb = u & 7u;
    uvec2 sm = k4_scale_min(b + 4u, sb);
    float d = w_f16(b) * float(sm.x), m = w_f16(b + 2u) * float(sm.y);
    uint x = wq[tiled_byte(row, u >> 3, 144u, 16u + (sb >> 1) * 32u + 4u * q) >> 2];
    return vec4((u8x4(x) >> ((sb & 1u) * 4u)) & 0xfu) * d - m;
}
#elif defined(WTYPE_Q5_K)
// block (256 elements, 176 bytes): f16 d, f16 dmin, 12 scale bytes, 32 bytes of fifth bits (bit
// sb of byte l belongs to element 32*sb + l), 128 bytes of nibbles laid out as in Q4_K.
vec4 quad_values(uint row, uint u, uint q, uint ncols) {
    uint b = row + (u >> 3) * 176u;
    uint sb = u & 7u;
    uvec2 sm = k4_scale_min(b + 4u, sb);
    float d = w_f16(b) * float(sm.x), m = w_f16(b + 2u) * float(sm.y);
    uvec4 h = (u8x4(wq[(b + 16u + 4u * q) >> 2]) >> sb) & 1u;
    uvec4 lo = (u8x4(wq[(b + 48u + (sb >> 1) * 32u + 4u * q) >> 2]) >> ((sb & 1u) * 4u)) & 0xfu;
    return vec4(lo | (h << 4)) * d - m;
}
#elif defined(WTYPE_Q6_K)
// block (256 elements, 210 bytes): 128 bytes of low nibbles ql, 64 bytes of 2-bit highs qh, 16
// signed scales, f16 d; rows in tiles (tiled_rows.glsl). Element 128h + 32k + l (half h,
// quarter k, l < 32) is the low (k < 2) or high (k >= 2) nibble of ql[64h + 32(k&1) + l] with
// bits 2k..2k+1 of qh[32h + l] on top, minus 32, times d * scale[8h + 2k + l/16].
vec4 quad_values(uint row, uint u, uint q, uint ncols) {
    uint i = u >> 3, sb = u & 7u;
    uint h = sb >> 2, k = sb & 3u;
    uvec4 lo = (u8x4(wq[tiled_byte(row, i, 210u, 64u * h + 32u * (k & 1u) + 4u * q) >> 2]) >>
                ((k >> 1) * 4u)) & 0xfu;
    uvec4 hi = (u8x4(wq[tiled_byte(row, i, 210u, 128u + 32u * h + 4u * q) >> 2]) >> (2u * k)) & 3u;
    float sc = float(int(w_u8(tiled_byte(row, i, 210u, 192u + 8u * h + 2u * k + (q >> 2))) << 24) >> 24);
    return vec4(ivec4(lo | (hi << 4)) - 32) * (w_f16(tiled_byte(row, i, 210u, 208u)) * sc);
}
#endif

// The 32 values of unit u (elements 32u .. 32u+31) as 8 quads.
void unit_values(uint row, uint u, uint ncols, out vec4 v[8]) {
    for (uint q = 0; q < 8u; ++q) v[q] = quad_values(row, u, q, ncols);
}
