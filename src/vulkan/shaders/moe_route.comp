// The router of a mixture-of-experts layer over rows of logits, one workgroup a row: of the
// row's n_expert router logits (x[x_off + row · n_expert ..]), the k largest and their
// renormalised weights at route[route_off + row · 2k ..] (moe_topk.glsl), so no host read-back
// is needed. The decode token's router chooses in its GEMV's last workgroup instead
// (moe_router.comp).
#version 450
#extension GL_EXT_control_flow_attributes : enable
#if defined(SUBGROUP)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;  // threads, a power of two

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Route { uint route[]; };

layout(push_constant) uniform Push {
    uint n_expert;
    uint k;
    uint x_off;      // floats
    uint route_off;  // words
} p;

#include "moe_topk.glsl"

void main() {
    uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    route_row(row, p.x_off + row * p.n_expert, gl_LocalInvocationID.x);
}
