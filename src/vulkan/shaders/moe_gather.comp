// The inputs of a window's (row, slot) pairs in the experts' order, as F16 rows for the expert
// GEMMs' NV tiles (gemm_experts_cm2.comp): row pos of the output is the F32 row of the window
// that the pair at position pos reads, perm[pos] / k (moe_sort.comp wrote perm). One thread
// writes one 16-byte chunk of 8 halves; workgroup y is the position.
#version 450

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Act { float act[]; };
layout(std430, binding = 1) readonly buffer Perm { uint perm[]; };
layout(std430, binding = 2) writeonly buffer H { uvec4 h[]; };

layout(push_constant) uniform Push {
    uint K;         // values a row, a multiple of 8
    uint k;         // slots a row
    uint x_off;     // floats: the window's rows
    uint perm_off;  // words
    uint h_off;     // 16-byte chunks: position 0's row
} p;

void main() {
    const uint c = gl_GlobalInvocationID.x, pos = gl_WorkGroupID.y;
    if (c >= p.K / 8u) return;
    const uint b = p.x_off + (perm[p.perm_off + pos] / p.k) * p.K + 8u * c;
    h[p.h_off + pos * (p.K / 8u) + c] =
        uvec4(packHalf2x16(vec2(act[b], act[b + 1u])), packHalf2x16(vec2(act[b + 2u], act[b + 3u])),
              packHalf2x16(vec2(act[b + 4u], act[b + 5u])), packHalf2x16(vec2(act[b + 6u], act[b + 7u])));
}
