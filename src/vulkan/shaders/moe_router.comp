// The router of a mixture-of-experts layer for one token, with its choice as the epilogue: the
// n_expert logits W · xn (F32 rows of n_embd values, as llama-quantize leaves the router), RPW
// rows a workgroup, stored at x[logit_off ..]; each workgroup then counts itself on
// counter[counter_idx], and the last to arrive chooses the k experts from all the logits as
// moe_route.comp does (moe_topk.glsl), writes them at route[route_off ..] and sets the counter
// back to 0 for the next dispatch (as gemv.comp's norm epilogue does). With gate_off, one row
// more: the shared expert's gate logit gw[gate_off ..] · xn at x[logit_off + n_expert], which the
// experts' weighted sum reads (gemv_batch.comp, shared_off).
//
// Why: the choice was one workgroup's dispatch behind a barrier of its own after the router's
// GEMV, a stage in each of a 35B-A3B's 40 layers (that stage, with the shared expert's SwiGLU,
// took 630 us of a 4.5 ms token timed a stage at a time on an H100: docs/perf/history.md,
// 2026-12-05 (19:30)).
#version 450
#extension GL_EXT_control_flow_attributes : enable
#if defined(SUBGROUP)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;  // threads, a power of two of at least RPW
// 1: n_embd and xn_off are multiples of 4, so the router's rows and xn are read as vec4s.
layout(constant_id = 1) const uint V4 = 0;

layout(std430, binding = 0) readonly buffer W { float w[]; };
layout(std430, binding = 0) readonly buffer W4 { vec4 w4[]; };
// xn in, the logits out: coherent, so the last workgroup reads the others' logits, not a stale
// cache line. (xn, written by an earlier dispatch, is also read through X4.)
layout(std430, binding = 1) coherent buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 2) buffer Route { uint route[]; };
layout(std430, binding = 3) buffer Counter { uint counter[]; };  // 0 between dispatches
layout(std430, binding = 4) readonly buffer G { float gw[]; };

layout(push_constant) uniform Push {
    uint n_expert;
    uint k;
    uint n_embd;
    uint xn_off, logit_off;  // floats of binding 1
    uint route_off;          // words of binding 2
    uint counter_idx;
    uint gate_off;  // floats of binding 4: the shared expert's gate (0xffffffff: none)
} p;

#include "moe_topk.glsl"

const uint RPW = 4u;          // router rows a workgroup
const uint LANES = WG / RPW;  // threads a row
// Loads a thread requests before it uses any: a row of 2048 over 64 lanes is one round of
// loads, not a chain of them (the loop of one load at a time waited on memory for each: the
// router's stage took ~20 us a layer of a 35B-A3B token on an H100, its bytes under 1 us).
const uint UNROLL = 8u;
shared float dot_part[WG];
shared uint last_group;

// Row `row`'s dot product with xn over this lane's columns l, l + LANES, ... (the router's
// rows; n_expert: the shared expert's gate).
float lane_dot(uint row, uint l) {
    float s = 0.0;
    const bool gate = row >= p.n_expert;
    if (V4 == 1u && !gate) {
        const uint n4 = p.n_embd / 4u, wo = row * n4, xo = p.xn_off / 4u;
        for (uint c0 = l; c0 < n4; c0 += LANES * UNROLL) {
            vec4 a[UNROLL], b[UNROLL];
            [[unroll]] for (uint u = 0u; u < UNROLL; ++u) {
                const uint c = min(c0 + u * LANES, n4 - 1u);
                a[u] = w4[wo + c];
                b[u] = x4[xo + c];
            }
            [[unroll]] for (uint u = 0u; u < UNROLL; ++u)
                if (c0 + u * LANES < n4) s += dot(a[u], b[u]);
        }
        return s;
    }
    const uint wo = gate ? p.gate_off : row * p.n_embd;
    for (uint c0 = l; c0 < p.n_embd; c0 += LANES * UNROLL) {
        float a[UNROLL], b[UNROLL];
        [[unroll]] for (uint u = 0u; u < UNROLL; ++u) {
            const uint c = min(c0 + u * LANES, p.n_embd - 1u);
            a[u] = gate ? gw[wo + c] : w[wo + c];
            b[u] = x[p.xn_off + c];
        }
        [[unroll]] for (uint u = 0u; u < UNROLL; ++u)
            if (c0 + u * LANES < p.n_embd) s += a[u] * b[u];
    }
    return s;
}

void main() {
    uint t = gl_LocalInvocationID.x;
    uint r = t / LANES, l = t % LANES;
    uint row = gl_WorkGroupID.x * RPW + r;
    uint rows = p.n_expert + (p.gate_off != 0xffffffffu ? 1u : 0u);
    float s = row < rows ? lane_dot(row, l) : 0.0;
    dot_part[t] = s;
    barrier();
    for (uint h = LANES / 2u; h > 0u; h >>= 1) {
        if (l < h) dot_part[t] += dot_part[t + h];
        barrier();
    }
    if (l == 0u && row < rows) x[p.logit_off + row] = dot_part[t];

    // Release: this group's logits reach device scope before it counts itself.
    memoryBarrierBuffer();
    barrier();
    if (t == 0u)
        last_group = atomicAdd(counter[p.counter_idx], 1u) == gl_NumWorkGroups.x - 1u ? 1u : 0u;
    barrier();
    if (last_group == 0u) return;
    // Acquire: every other group's logits were released before its increment.
    memoryBarrierBuffer();
    route_row(0u, p.logit_off, t);
    if (t == 0u) atomicExchange(counter[p.counter_idx], 0u);
}
