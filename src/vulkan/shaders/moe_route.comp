// The router of a mixture-of-experts layer, one workgroup a row: of the row's n_expert router
// logits (x[x_off + row · n_expert ..]), the k largest (the lower index first on a tie, as
// torch.topk orders them), their softmax probabilities over all experts renormalised to sum to
// one. Written to route[route_off + row · 2k ..]: the k expert ids (as uints) in ascending
// order, then their k weights (as floats) in the same order, so the experts' outputs are summed
// in the order the CPU chain sums them (cpu/forward_experts.cpp) and no host read-back is needed.
//
// k rounds of an argmax over the workgroup, each reduced through shared memory as (value,
// index) pairs; a chosen expert drops out of the next rounds. k is at most 32.
#version 450

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

const uint KMAX = 32u;
shared float best_v[WG];
shared uint best_i[WG];
shared float sum_part[WG];
shared uint chosen[KMAX];

// The better of two (value, index) pairs: the larger value, the lower index on a tie.
bool better(float va, uint ia, float vb, uint ib) { return va > vb || (va == vb && ia < ib); }

// The argmax over the workgroup of each thread's (v, i); the result in best_v[0], best_i[0].
void argmax(float v, uint i, uint t) {
    best_v[t] = v;
    best_i[t] = i;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s && better(best_v[t + s], best_i[t + s], best_v[t], best_i[t])) {
            best_v[t] = best_v[t + s];
            best_i[t] = best_i[t + s];
        }
        barrier();
    }
}

void main() {
    uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint t = gl_LocalInvocationID.x;
    uint base = p.x_off + row * p.n_expert;
    const float NEG = uintBitsToFloat(0xff800000u);  // -inf: below every finite logit

    // The row's maximum and the softmax's normaliser (which cancels in the renormalisation but
    // rounds the weights as the reference's does).
    float m = NEG;
    for (uint e = t; e < p.n_expert; e += WG) m = max(m, x[base + e]);
    argmax(m, 0u, t);
    float mx = best_v[0];
    barrier();
    float s = 0.0;
    for (uint e = t; e < p.n_expert; e += WG) s += exp(x[base + e] - mx);
    sum_part[t] = s;
    barrier();
    for (uint h = WG / 2u; h > 0u; h >>= 1) {
        if (t < h) sum_part[t] += sum_part[t + h];
        barrier();
    }
    float sum_all = sum_part[0];

    // k rounds: each thread offers its best expert not chosen yet.
    for (uint j = 0; j < p.k; ++j) {
        float v = NEG;
        uint vi = 0xffffffffu;
        for (uint e = t; e < p.n_expert; e += WG) {
            bool taken = false;
            for (uint c = 0; c < j; ++c) taken = taken || chosen[c] == e;
            float xe = x[base + e];
            if (!taken && (vi == 0xffffffffu || better(xe, e, v, vi))) {
                v = xe;
                vi = e;
            }
        }
        argmax(v, vi, t);
        if (t == 0u) chosen[j] = best_i[0];
        barrier();
    }

    // Thread 0 weighs the k experts (summed in the order they were chosen, as the CPU chain
    // sums them), sorts them by id and writes them renormalised.
    if (t == 0u) {
        float w[KMAX];
        float sum = 0.0;
        for (uint j = 0; j < p.k; ++j) {
            w[j] = exp(x[base + chosen[j]] - mx) / sum_all;
            sum += w[j];
        }
        for (uint a = 1u; a < p.k; ++a) {
            uint id = chosen[a];
            float wa = w[a];
            uint b = a;
            for (; b > 0u && chosen[b - 1u] > id; --b) {
                chosen[b] = chosen[b - 1u];
                w[b] = w[b - 1u];
            }
            chosen[b] = id;
            w[b] = wa;
        }
        uint o = p.route_off + row * 2u * p.k;
        for (uint j = 0; j < p.k; ++j) {
            route[o + j] = chosen[j];
            route[o + p.k + j] = floatBitsToUint(w[j] / sum);
        }
    }
}
