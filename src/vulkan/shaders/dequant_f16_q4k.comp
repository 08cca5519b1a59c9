// Q4_K weight rows (held in tiles of 32 rows, tiled_rows.glsl) to F16, [rows][cols], as
// dequant_f16.comp writes them, but one thread a row's pair of sub-blocks (64 values): it loads
// the block's 16-byte header and the pair's 32 bytes of nibbles (the low nibbles the first
// sub-block, the high ones the second) as three 16-byte words and writes 128 bytes.
// Why: dequant_f16.comp's thread writes 16 bytes and reads the header's fields and scale bytes
// one word at a time for them, so its loads, not the memory, bound the expansion (an H100 wrote
// a Qwen3-30B-A3B expert stack at ~2.1 TB/s of its traffic).
// The 32 threads of a subgroup take 32 rows of one tile: each of their loads reads 512
// contiguous bytes of one field.
#version 450
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Weights { uvec4 wq4[]; };
layout(std430, binding = 1) writeonly buffer H { uvec4 h[]; };

layout(push_constant) uniform Push {
    uint rows, cols;  // cols a multiple of 256
    uint row_bytes;
} p;

#include "k4_scales.glsl"
#include "tiled_rows.glsl"

// Eight halves of one sub-block, d · q - m, q the nibbles at `shift` of bytes 2·first ..
// 2·first + 7 of n.
uvec4 halves(uvec4 n, uint shift, float d, float m, uint first) {
    uvec4 out4;
    [[unroll]] for (uint j = 0; j < 4u; ++j) {
        const uint w = n[(first + j) >> 1];
        const uint part = ((first + j) & 1u) * 16u;
        const uint b0 = (w >> part) & 0xffu, b1 = (w >> (part + 8u)) & 0xffu;
        const vec2 v = vec2(float((b0 >> shift) & 15u), float((b1 >> shift) & 15u)) * d - m;
        out4[j] = packHalf2x16(v);
    }
    return out4;
}

void main() {
    const uint g = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    const uint nb = p.cols / 256u;
    const uint lane = g & 31u, pair = (g >> 5) & 3u, q = g >> 7;
    const uint i = q % nb, r = (q / nb) * 32u + lane;
    if (r >= p.rows) return;
    const uint row = tiled_row(r, p.row_bytes);
    const uvec4 head = wq4[tiled_byte(row, i, 144u, 0u) >> 4];
    uvec4 nib[2];
    nib[0] = wq4[tiled_byte(row, i, 144u, 16u + 32u * pair) >> 4];
    nib[1] = wq4[tiled_byte(row, i, 144u, 32u + 32u * pair) >> 4];
    vec2 sc, mn;
    k4_pair(head, pair, sc, mn);
    const vec2 dm = unpackHalf2x16(head.x);
    // Sub-block 2·pair (low nibbles), then 2·pair + 1 (high), 32 values each: bytes 0-15 in
    // nib[0], 16-31 in nib[1], four 16-byte chunks of output each.
    const uint out0 = (r * p.cols + i * 256u + pair * 64u) / 8u;
    [[unroll]] for (uint s = 0; s < 2u; ++s) {
        const float d = dm.x * sc[s], m = dm.y * mn[s];
        [[unroll]] for (uint c = 0; c < 4u; ++c)
            h[out0 + 4u * s + c] = halves(nib[c >> 1], 4u * s, d, m, (c & 1u) * 4u);
    }
}
