// Weight rows from their GGUF blocks (WTYPE_* define) to F16, [rows][cols] packed 8 halves a
// 16-byte chunk (cols a multiple of 8). The prefill GEMM on NV cooperative matrix 2 multiplies
// F16 tiles at about twice the rate it reaches when its tensor loads decode the blocks element
// by element (measured on an H200), so for a window of many rows it expands one matrix at a
// time into a reused scratch with this kernel, then runs the F16 tiles over it. One thread
// writes one chunk: two quads of one 32-element unit.
#version 450

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Weights { uint wq[]; };
layout(std430, binding = 1) writeonly buffer H { uvec4 h[]; };

layout(push_constant) uniform Push {
    uint rows, cols;
    uint row_bytes;
} p;

#include "blocks.glsl"

void main() {
    uint c = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    uint per_row = p.cols / 8u;
    if (c >= p.rows * per_row) return;
    uint r = c / per_row, e = (c % per_row) * 8u;
    uint u = e / 32u, q = (e % 32u) / 4u;
    vec4 a = quad_values(w_row(r, p.row_bytes), u, q, p.cols);
    vec4 b = quad_values(w_row(r, p.row_bytes), u, q + 1u, p.cols);
    h[c] = uvec4(packHalf2x16(a.xy), packHalf2x16(a.zw), packHalf2x16(b.xy), packHalf2x16(b.zw));
}
