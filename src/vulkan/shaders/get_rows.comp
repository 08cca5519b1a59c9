// Embedding lookup on the device: out[out_off + r*ncols ..] = dequantized row tokens[r] of the
// table (GGUF block format chosen by WTYPE_*), for n rows. The token ids come from a buffer (the
// per-token values of the decode command, or a window's ids), so nothing is re-recorded.
// One workgroup per row; threads stride over units of 32 elements.
#version 450

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Weights { uint wq[]; };
layout(std430, binding = 1) readonly buffer Ids { uint ids[]; };
layout(std430, binding = 2) writeonly buffer Out { float outv[]; };

layout(push_constant) uniform Push {
    uint ncols;
    uint nrows;      // rows of the table (ids are clamped to it)
    uint row_bytes;
    uint id_off;     // first id in ids
    uint out_off;    // in floats
    uint n;          // rows to fetch
} p;

#include "blocks.glsl"

void main() {
    uint r = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (r >= p.n) return;
    uint id = min(ids[p.id_off + r], p.nrows - 1u);  // a bad id reads the last row, never past it
    uint units = (p.ncols + 31u) / 32u;
    for (uint u = gl_LocalInvocationID.x; u < units; u += 64u) {
        vec4 v[8];
        unit_values(w_row(id, p.row_bytes), u, p.ncols, v);
        uint ob = p.out_off + r * p.ncols + u * 32u;
        uint m = min(32u, p.ncols - u * 32u);
        for (uint e = 0; e < m; ++e) outv[ob + e] = v[e >> 2][e & 3u];
    }
}
