// The dependent chain of the decode stages without their weights (the stage speed report only).
// Round r maps vector x_r of n values to x_{r+1}: every workgroup g reads all of x_r, folds it
// against weights it computes (as a GEMV's row reads all of its x), and writes its share of
// x_{r+1}[j] = (x_r[j] + (x_r · w_g) / n) / 2. Between two rounds either the dispatch ends (one
// round a dispatch, a pipeline barrier before the next), or the workgroups hand the round on
// inside the dispatch: each counts itself on the round's word (fence, workgroup barrier, atomic
// add) and waits by atomic polls until every workgroup of the dispatch has. The words are never
// cleared: a workgroup that finds old on the word waits for the next multiple of the grid, so a
// recorded command runs again as it is. A wait longer than spin_limit polls gives up and sets
// the flag word (a device that does not keep every workgroup of the grid running cannot hang).
// With skew set, one workgroup a round writes late, so readers that did not wait read NaN.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

layout(std430, binding = 0) coherent buffer X { float x[]; };       // (rounds + 1) vectors of n
layout(std430, binding = 1) coherent buffer Sync { uint words[]; };  // [r]: round r; [last]: flag

layout(push_constant) uniform Push {
    uint n;
    uint round0;      // the first round of this dispatch
    uint rounds;      // rounds in this dispatch
    uint spin_limit;  // polls before a wait gives up
    uint flag;        // index of the flag word
    uint skew;        // nonzero: workgroup r mod grid spins that long before it writes round r
} p;

shared float red[WG];
shared uint gave_up;

float weight(uint i, uint g) { return float(int((i * 7u + g * 13u) % 17u) - 8) / 8.0; }

void main() {
    const uint g = gl_WorkGroupID.x, grid = gl_NumWorkGroups.x, t = gl_LocalInvocationID.x;
    const uint share = (p.n + grid - 1u) / grid;
    for (uint k = 0u; k < p.rounds; ++k) {
        const uint r = p.round0 + k, src = r * p.n, dst = src + p.n;
        float s = 0.0;
        for (uint i = t; i < p.n; i += WG) s += x[src + i] * weight(i, g);
        red[t] = s;
        barrier();
        for (uint h = WG / 2u; h > 0u; h >>= 1) {
            if (t < h) red[t] += red[t + h];
            barrier();
        }
        float m = red[0] / float(p.n);
        if (p.skew != 0u && g == r % grid) {
            // Late on purpose (the check of the handoff): its readers must wait for it.
            uint v = g + 1u;
            for (uint i = 0u; i < p.skew; ++i) v = v * 1664525u + 1013904223u;
            if (v == 0xffffffffu) m = 0.0;
        }
        for (uint j = g * share + t; j < min(p.n, (g + 1u) * share); j += WG)
            x[dst + j] = 0.5 * (x[src + j] + m);
        if (k + 1u == p.rounds) break;
        memoryBarrierBuffer();
        barrier();  // every write of the workgroup made before its count; red read by all
        if (t == 0u) {
            const uint old = atomicAdd(words[r], 1u);
            const uint want = (old / grid + 1u) * grid;
            uint spins = 0u;
            while (atomicOr(words[r], 0u) < want && spins < p.spin_limit) ++spins;
            gave_up = spins >= p.spin_limit ? 1u : 0u;
            if (gave_up != 0u) atomicOr(words[p.flag], 1u);
            memoryBarrierBuffer();
        }
        barrier();
        if (gave_up != 0u) return;
    }
}
