// The gated RMSNorm at the end of a Gated DeltaNet layer, for many rows of d_v values (every
// value head of every row of a window): y = x / sqrt(mean(x²) + eps) · w · silu(z), in place.
// One workgroup per row of d_v.
//
// Why this shape: the scan's workgroups hold column slices of a head, not whole heads, so the
// norm over d_v cannot end the scan without another pass; a workgroup per (row, head) is a
// plain parallel reduction. Measured on the H200: 11 us a 512-row window for H_v 16, 18 us for
// H_v 32 (0.02-0.04 us a row).
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) readonly buffer Params { float prm[]; };

layout(push_constant) uniform Push {
    uint n, nrows;
    uint x_off;     // act: rows of n, contiguous
    uint z_off;     // act: gate rows of n, contiguous
    uint norm_off;  // prm: weight (n)
    float eps;
} p;

shared float red[WG];
#include "reduce.glsl"

float silu(float x) { return x / (1.0 + exp(-x)); }

void main() {
    uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= p.nrows) return;  // uniform per workgroup
    uint xb = p.x_off + row * p.n, zb = p.z_off + row * p.n;
    float ss = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG) ss += act[xb + i] * act[xb + i];
    float scale = inversesqrt(wg_sum(ss) / float(p.n) + p.eps);
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG)
        act[xb + i] = act[xb + i] * scale * prm[p.norm_off + i] * silu(act[zb + i]);
}
