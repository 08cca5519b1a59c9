// RMSNorm fused with the weight multiply: y = x / sqrt(mean(x²) + eps) · w, one workgroup per row.
// Rows may be strided (per-head norms of q and k read heads of a wider row).
// F16_OUT: each row also as halves at h[row · n ..] (n even), the F16 copy the next GEMM tiles
// read (f16_copy.comp's layout), so that copy needs no stage of its own.
//
// V4 (rows of up to 4 · R4 · WG values, every offset and stride a multiple of 4, the views
// 16-byte aligned): each thread requests its vec4s of x and w at once and keeps them, so the row
// is read once in one round of loads. (A loop of one load at a time, twice over the row, waited on
// memory for each: a window's norm of 8 rows of 4096 took ~12 us on an H100.)
#version 450
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint V4 = 0;

layout(std430, binding = 0) readonly buffer Weights { float w[]; };
layout(std430, binding = 0) readonly buffer Weights4 { vec4 w4[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(std430, binding = 2) writeonly buffer Y4 { vec4 y4[]; };
#if defined(F16_OUT)
layout(std430, binding = 3) writeonly buffer H { uint h[]; };     // 2 halves a word
layout(std430, binding = 3) writeonly buffer H2 { uvec2 h2[]; };  // 4 halves
#endif

layout(push_constant) uniform Push {
    uint n;
    uint nrows;
    uint x_off, x_stride;
    uint y_off, y_stride;
    float eps;
} p;

const uint R4 = 8u;  // vec4s a thread holds (V4)

shared float red[WG];
#include "reduce.glsl"

void main() {
    uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= p.nrows) return;  // uniform per workgroup, so no barrier is skipped by part of it
    const uint t = gl_LocalInvocationID.x;
    uint xb = p.x_off + row * p.x_stride, yb = p.y_off + row * p.y_stride;
    if (V4 == 1u) {
        const uint n4 = p.n / 4u;
        vec4 xv[R4], wv[R4];
        [[unroll]] for (uint j = 0u; j < R4; ++j) {
            const uint i = t + j * WG;
            xv[j] = i < n4 ? x4[xb / 4u + i] : vec4(0.0);
            wv[j] = i < n4 ? w4[i] : vec4(0.0);
        }
        float ss = 0.0;
        [[unroll]] for (uint j = 0u; j < R4; ++j) ss += dot(xv[j], xv[j]);
        const float scale = inversesqrt(wg_sum(ss) / float(p.n) + p.eps);
        [[unroll]] for (uint j = 0u; j < R4; ++j) {
            const uint i = t + j * WG;
            if (i >= n4) break;
            const vec4 v = xv[j] * scale * wv[j];
            y4[yb / 4u + i] = v;
#if defined(F16_OUT)
            h2[row * n4 + i] = uvec2(packHalf2x16(v.xy), packHalf2x16(v.zw));
#endif
        }
        return;
    }
    float ss = 0.0;
    for (uint i = t; i < p.n; i += WG) ss += x[xb + i] * x[xb + i];
    float scale = inversesqrt(wg_sum(ss) / float(p.n) + p.eps);
#if defined(F16_OUT)
    for (uint j = t; j < p.n / 2u; j += WG) {
        uint i = 2u * j;
        vec2 v = vec2(x[xb + i], x[xb + i + 1u]) * scale * vec2(w[i], w[i + 1u]);
        y[yb + i] = v.x;
        y[yb + i + 1u] = v.y;
        h[row * (p.n / 2u) + j] = packHalf2x16(v);
    }
#else
    for (uint i = t; i < p.n; i += WG) y[yb + i] = x[xb + i] * scale * w[i];
#endif
}
