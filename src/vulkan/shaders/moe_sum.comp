// The weighted sum of a window row's experts' outputs into the residual stream, one workgroup a
// row: h[row] += Σ_j w_j · out[row · k + j], n values a row, the k slots in slot order (ids
// ascending, as the CPU chain adds them); w_j from route[route_off + row · 2k + k + j]
// (moe_route.comp). With inv_off, slot j's output lies at the pair's position in the experts'
// order instead, route[inv_off + row · k + j] (moe_sort.comp), as the NV expert tiles write it.
#version 450

layout(local_size_x = 256) in;

layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) readonly buffer Route { uint route[]; };

layout(push_constant) uniform Push {
    uint n, k;
    uint out_off;    // floats: the slots' outputs, n a slot
    uint h_off;      // floats: the residual stream, n a row
    uint route_off;  // words
    uint inv_off;    // words of route (0xffffffff: the slots in the rows' order)
} p;

void main() {
    uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint w0 = p.route_off + row * 2u * p.k + p.k;
    uint slot[8];  // (k is at most 8: ExpertKernels::kMaxUsed)
    for (uint j = 0u; j < p.k; ++j)
        slot[j] = p.inv_off == 0xffffffffu ? row * p.k + j : route[p.inv_off + row * p.k + j];
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += 256u) {
        float s = 0.0;
        for (uint j = 0u; j < p.k; ++j)
            s += uintBitsToFloat(route[w0 + j]) * act[p.out_off + slot[j] * p.n + i];
        act[p.h_off + row * p.n + i] += s;
    }
}
