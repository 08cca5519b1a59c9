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

layout(std430, binding = 0) readonly buffer W { float w[]; };
// xn in, the logits out: coherent, so the last workgroup reads the others' logits, not a stale
// cache line.
layout(std430, binding = 1) coherent buffer X { float x[]; };
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
shared float dot_part[WG];
shared uint last_group;

void main() {
    uint t = gl_LocalInvocationID.x;
    uint r = t / LANES, l = t % LANES;
    uint row = gl_WorkGroupID.x * RPW + r;
    uint rows = p.n_expert + (p.gate_off != 0xffffffffu ? 1u : 0u);
    float s = 0.0;
    if (row < p.n_expert) {
        uint wo = row * p.n_embd;
        for (uint c = l; c < p.n_embd; c += LANES) s += w[wo + c] * x[p.xn_off + c];
    } else if (row < rows) {
        for (uint c = l; c < p.n_embd; c += LANES) s += gw[p.gate_off + c] * x[p.xn_off + c];
    }
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
