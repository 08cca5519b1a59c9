// Q6_K weight rows (held in tiles of 32 rows, tiled_rows.glsl) to F16, [rows][cols], as
// dequant_f16.comp writes them, but one thread a row's 64 values of one half h and quarter
// parity kk of a block: quarters kk and kk + 2 share their 32 bytes of low bits (ql, the low and
// the high nibbles) and every quarter of a half its 32 bytes of high bits (qh). The thread loads
// those, the 16 scales and d as five 16-byte words and one more, and writes 128 bytes.
// Why: as dequant_f16_q4k.comp (each thread of dequant_f16.comp wrote 16 bytes after a dozen
// word loads). Element 128h + 32k + l is the low (k < 2) or high (k >= 2) nibble of
// ql[64h + 32(k&1) + l] with bits 2k..2k+1 of qh[32h + l] on top, minus 32, times
// d · scale[8h + 2k + l/16]; the arithmetic is dequant_f16.comp's.
#version 450
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Weights { uvec4 wq4[]; };
layout(std430, binding = 0) readonly buffer WeightWords { uint wq[]; };
layout(std430, binding = 1) writeonly buffer H { uvec4 h[]; };

layout(push_constant) uniform Push {
    uint rows, cols;  // cols a multiple of 256
    uint row_bytes;
} p;

#include "tiled_rows.glsl"

uint byte_of(uvec4 v, uint b) { return (v[b >> 2] >> ((b & 3u) * 8u)) & 0xffu; }

void main() {
    const uint g = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    const uint nb = p.cols / 256u;
    const uint lane = g & 31u, part = (g >> 5) & 3u, q = g >> 7;
    const uint i = q % nb, r = (q / nb) * 32u + lane;
    if (r >= p.rows) return;
    const uint half_ = part >> 1, kk = part & 1u;
    const uint row = tiled_row(r, p.row_bytes);
    uvec4 ql[2], qh[2];
    ql[0] = wq4[tiled_byte(row, i, 210u, 64u * half_ + 32u * kk) >> 4];
    ql[1] = wq4[tiled_byte(row, i, 210u, 64u * half_ + 32u * kk + 16u) >> 4];
    qh[0] = wq4[tiled_byte(row, i, 210u, 128u + 32u * half_) >> 4];
    qh[1] = wq4[tiled_byte(row, i, 210u, 128u + 32u * half_ + 16u) >> 4];
    const uvec4 scales = wq4[tiled_byte(row, i, 210u, 192u) >> 4];
    const uint da = tiled_byte(row, i, 210u, 208u);
    const float d = unpackHalf2x16(wq[da >> 2] >> ((da & 2u) * 8u)).x;
    [[unroll]] for (uint s = 0; s < 2u; ++s) {
        const uint k = kk + 2u * s;
        const uint out0 = (r * p.cols + i * 256u + 128u * half_ + 32u * k) / 8u;
        // Chunk c holds values l = 8c .. 8c + 7: bytes 8(c & 1) .. of word c >> 1.
        [[unroll]] for (uint c = 0; c < 4u; ++c) {
            const float sc = float(int(byte_of(scales, 8u * half_ + 2u * k + (c >> 1)) << 24) >> 24);
            const float ds = d * sc;
            uvec4 out4;
            [[unroll]] for (uint j = 0; j < 4u; ++j) {
                const uint b = 8u * (c & 1u) + 2u * j;
                vec2 v;
                [[unroll]] for (uint e = 0; e < 2u; ++e) {
                    const uint lo = (byte_of(ql[c >> 1], b + e) >> (4u * s)) & 15u;
                    const uint hi = (byte_of(qh[c >> 1], b + e) >> (2u * k)) & 3u;
                    v[e] = float(int(lo | (hi << 4)) - 32) * ds;
                }
                out4[j] = packHalf2x16(v);
            }
            h[out0 + c] = out4;
        }
    }
}
