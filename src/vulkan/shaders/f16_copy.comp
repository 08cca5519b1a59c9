// An F16 copy of n F32 activations (n a multiple of 8), for the cooperative-matrix GEMM tiles:
// converting once here spares every workgroup of every GEMM that reads the same rows its own
// conversion. One thread writes one 16-byte chunk of 8 halves.
#version 450

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer H { uvec4 h[]; };

layout(push_constant) uniform Push {
    uint n;      // floats, a multiple of 8
    uint x_off;  // floats
} p;

void main() {
    uint c = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    if (c >= p.n / 8u) return;
    uint b = p.x_off + 8u * c;
    h[c] = uvec4(packHalf2x16(vec2(x[b], x[b + 1u])), packHalf2x16(vec2(x[b + 2u], x[b + 3u])),
                 packHalf2x16(vec2(x[b + 4u], x[b + 5u])), packHalf2x16(vec2(x[b + 6u], x[b + 7u])));
}
