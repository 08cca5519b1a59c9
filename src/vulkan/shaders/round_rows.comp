// nvec rows of x (F32, [nvec][ncols] at x_off, in floats) rounded to signed bytes in blocks of 16
// (round_bytes.glsl), for the batched GEMV over bytes (gemv_batch.comp X_INT8): row v goes to
// word out_off + v · (ncols / 4 + ncols / 8), its bytes (four a word) and then each block's scale
// and scaled sum, the layout gemv.comp's XPRE reads. One thread a block of 16 values.
// SWIGLU: x holds a SwiGLU's gates and x[up_off ..] its ups, laid out alike, and the rows
// rounded are SiLU(gate) · up (a batched step's expert slots, formed once for the down GEMV
// rather than again by each of its workgroups).
#version 450

#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Act { float act[]; };
layout(std430, binding = 1) writeonly buffer ActU { uint act_u[]; };

layout(push_constant) uniform Push {
    uint x_off;    // floats
    uint ncols;    // a multiple of 16
    uint nvec;
    uint out_off;  // words
    uint up_off;   // SWIGLU: the ups (floats)
} p;

#define ROUND_ONLY
#define ROUND_TO_ACT
#include "round_bytes.glsl"

void main() {
    uint i = gl_WorkGroupID.y * gl_NumWorkGroups.x * 64u + gl_GlobalInvocationID.x;
    uint blocks = p.ncols / 16u;
    if (i >= p.nvec * blocks) return;
    uint v = i / blocks, e = i % blocks;
    uint src = p.x_off + v * p.ncols + 16u * e;
    vec4 q[4];
    [[unroll]] for (uint j = 0u; j < 4u; ++j)
        q[j] = vec4(x[src + 4u * j], x[src + 4u * j + 1u], x[src + 4u * j + 2u], x[src + 4u * j + 3u]);
#if defined(SWIGLU)
    uint up = p.up_off + (src - p.x_off);
    [[unroll]] for (uint j = 0u; j < 4u; ++j) {
        vec4 u = vec4(x[up + 4u * j], x[up + 4u * j + 1u], x[up + 4u * j + 2u], x[up + 4u * j + 3u]);
        q[j] = q[j] / (1.0 + exp(-q[j])) * u;
    }
#endif
    store_rounded_block(q, p.out_off + v * (p.ncols / 4u + p.ncols / 8u), p.ncols, e);
}
