// y = W·x for one weight matrix in a GGUF block format (chosen by the WTYPE_* define), batch 1.
// Each workgroup computes ROWS output rows; its threads stride over the row in units of 32
// elements and combine their sums through shared memory (no subgroup size is assumed).
// mode 0 writes y, mode 1 adds to y (the residual stream), so no separate add pass is needed.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint ROWS = 2;

layout(std430, binding = 0) readonly buffer Weights { uint wq[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer Y { float y[]; };

layout(push_constant) uniform Push {
    uint ncols;      // elements per row
    uint nrows;
    uint row_bytes;  // bytes per weight row
    uint x_off;      // in floats
    uint y_off;      // in floats
    uint mode;       // 0: y = W·x, 1: y += W·x
} p;

#include "blocks.glsl"

shared float partial[ROWS][WG];

void main() {
    uint wg = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint tid = gl_LocalInvocationID.x;
    uint units = (p.ncols + 31u) / 32u;
    for (uint r = 0; r < ROWS; ++r) {
        // Rows past the end are computed on row nrows-1 (clamped, never read out of range) and
        // not stored.
        uint row = min(wg * ROWS + r, p.nrows - 1u);
        float acc = 0.0;
        for (uint u = tid; u < units; u += WG) {
            vec4 v[8];
            unit_values(row * p.row_bytes, u, p.ncols, v);
            uint xb = p.x_off + u * 32u;
            if (u * 32u + 32u <= p.ncols) {
                for (uint i = 0; i < 8u; ++i)
                    acc += dot(v[i], vec4(x[xb + 4u * i], x[xb + 4u * i + 1u], x[xb + 4u * i + 2u], x[xb + 4u * i + 3u]));
            } else {  // the short tail of an F32/F16 row
                for (uint e = 0; e < p.ncols - u * 32u; ++e) acc += v[e >> 2][e & 3u] * x[xb + e];
            }
        }
        partial[r][tid] = acc;
    }
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) {
            for (uint r = 0; r < ROWS; ++r) partial[r][tid] += partial[r][tid + s];
        }
        barrier();
    }
    if (tid < ROWS) {
        uint row = wg * ROWS + tid;
        if (row < p.nrows) {
            float v = partial[tid][0];
            if (p.mode == 1u) v += y[p.y_off + row];
            y[p.y_off + row] = v;
        }
    }
}
