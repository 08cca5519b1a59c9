// Greedy sampling on the device: the index of the largest of n logits (lowest index on ties, NaN
// never wins), written to out[out_off] so only one integer returns to the host.
// One workgroup; each thread scans a strided slice, then a shared-memory tree picks the winner.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(std430, binding = 0) readonly buffer L { float logits[]; };
layout(std430, binding = 1) writeonly buffer O { uint outv[]; };

layout(push_constant) uniform Push {
    uint n;
    uint l_off;
    uint out_off;
} p;

shared float best_v[WG];
shared uint best_i[WG];

void main() {
    uint t = gl_LocalInvocationID.x;
    float bv = -1.0 / 0.0;
    uint bi = 0xffffffffu;
    for (uint i = t; i < p.n; i += WG) {
        float v = logits[p.l_off + i];
        if (v > bv || (bi == 0xffffffffu && !isnan(v))) {
            bv = v;
            bi = i;
        }
    }
    best_v[t] = bv;
    best_i[t] = bi;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s) {
            float ov = best_v[t + s];
            uint oi = best_i[t + s];
            bool take = oi != 0xffffffffu &&
                        (best_i[t] == 0xffffffffu || ov > best_v[t] || (ov == best_v[t] && oi < best_i[t]));
            if (take) {
                best_v[t] = ov;
                best_i[t] = oi;
            }
        }
        barrier();
    }
    if (t == 0u) outv[p.out_off] = best_i[0] == 0xffffffffu ? 0u : best_i[0];
}
