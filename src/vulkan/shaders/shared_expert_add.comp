// The shared expert's gated add of a mixture-of-experts layer, one workgroup a row:
// h[row] += sigmoid(w · xn[row]) · shared[row], n values a row (rows strided by n). The gate's
// dot product is reduced over the workgroup through shared memory, then every thread adds its
// part of the row: one dispatch where a 1-row GEMV and an add would take two stages. With
// norm_off set, the same workgroup then writes the next RMSNorm of the new row,
// xn[row] = h[row] / sqrt(mean(h[row]²) + eps) · norm_w, which saves the norm its own stage.
// With k > 0 it first adds the row's experts' weighted sum as moe_sum.comp does (the k slots'
// outputs at down_off, their weights in the route at route_off), in the same order, which saves
// that sum its stage too (with inv_off, each slot's output at its pair's position in the
// experts' order, as moe_sum.comp reads it).
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;  // threads, a power of two

layout(std430, binding = 0) readonly buffer W { float w[]; };
layout(std430, binding = 1) buffer Act { float act[]; };

layout(push_constant) uniform Push {
    uint n;
    uint w_off;       // floats of binding 0: the gate's weights
    uint xn_off;      // floats of binding 1: the normalized input (and the next norm's output)
    uint shared_off;  // ... the shared expert's output
    uint h_off;       // ... the residual stream
    uint norm_off;    // floats of binding 0: the next norm's weights (0xffffffff: no norm)
    float eps;
    uint k;           // experts a row whose weighted sum is added first (0: none)
    uint down_off;    // floats of binding 1: the slots' outputs, n a slot (row · k + j)
    uint route_off;   // floats of binding 1: the route (2k a row: ids, then weights)
    uint inv_off;     // floats of binding 1: each pair's position (0xffffffff: the rows' order)
} p;

shared float part[WG];

// The sum of every thread's v over the workgroup.
float workgroup_sum(float v, uint t) {
    barrier();  // the previous sum was read
    part[t] = v;
    barrier();
    for (uint h = WG / 2u; h > 0u; h >>= 1) {
        if (t < h) part[t] += part[t + h];
        barrier();
    }
    return part[0];
}

void main() {
    uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint t = gl_LocalInvocationID.x;
    float s = 0.0;
    for (uint i = t; i < p.n; i += WG) s += w[p.w_off + i] * act[p.xn_off + row * p.n + i];
    float g = 1.0 / (1.0 + exp(-workgroup_sum(s, t)));
    float ss = 0.0;
    const uint w0 = p.route_off + row * 2u * p.k + p.k;
    uint slot[8];  // (k is at most 8: ExpertKernels::kMaxUsed)
    for (uint j = 0u; j < p.k; ++j)
        slot[j] = p.inv_off == 0xffffffffu ? row * p.k + j
                                           : floatBitsToUint(act[p.inv_off + row * p.k + j]);
    for (uint i = t; i < p.n; i += WG) {
        float v = act[p.h_off + row * p.n + i];
        if (p.k > 0u) {  // moe_sum.comp's sum, in its order
            float e = 0.0;
            for (uint j = 0u; j < p.k; ++j)
                e += act[w0 + j] * act[p.down_off + slot[j] * p.n + i];
            v += e;
        }
        v += g * act[p.shared_off + row * p.n + i];
        act[p.h_off + row * p.n + i] = v;
        ss += v * v;
    }
    if (p.norm_off == 0xffffffffu) return;
    // Every thread reads back only the values it wrote itself: no barrier is needed for them.
    float r = inversesqrt(workgroup_sum(ss, t) / float(p.n) + p.eps);
    for (uint i = t; i < p.n; i += WG)
        act[p.xn_off + row * p.n + i] = act[p.h_off + row * p.n + i] * r * w[p.norm_off + i];
}
