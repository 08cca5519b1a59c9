// RMSNorm fused with the weight multiply: y = x / sqrt(mean(x²) + eps) · w, one workgroup per row.
// Rows may be strided (per-head norms of q and k read heads of a wider row).
// F16_OUT: each row also as halves at h[row · n ..] (n even), the F16 copy the next GEMM tiles
// read (f16_copy.comp's layout), so that copy needs no stage of its own.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

layout(std430, binding = 0) readonly buffer Weights { float w[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
#if defined(F16_OUT)
layout(std430, binding = 3) writeonly buffer H { uint h[]; };  // 2 halves a word
#endif

layout(push_constant) uniform Push {
    uint n;
    uint nrows;
    uint x_off, x_stride;
    uint y_off, y_stride;
    float eps;
} p;

shared float red[WG];
#include "reduce.glsl"

void main() {
    uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= p.nrows) return;  // uniform per workgroup, so no barrier is skipped by part of it
    uint xb = p.x_off + row * p.x_stride, yb = p.y_off + row * p.y_stride;
    float ss = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG) ss += x[xb + i] * x[xb + i];
    float scale = inversesqrt(wg_sum(ss) / float(p.n) + p.eps);
#if defined(F16_OUT)
    for (uint j = gl_LocalInvocationID.x; j < p.n / 2u; j += WG) {
        uint i = 2u * j;
        vec2 v = vec2(x[xb + i], x[xb + i + 1u]) * scale * vec2(w[i], w[i + 1u]);
        y[yb + i] = v.x;
        y[yb + i + 1u] = v.y;
        h[row * (p.n / 2u) + j] = packHalf2x16(v);
    }
#else
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG) y[yb + i] = x[xb + i] * scale * w[i];
#endif
}
