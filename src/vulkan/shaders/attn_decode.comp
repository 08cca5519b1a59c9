// Decode attention, split over the KV length: workgroup (query head h, split s) attends to cache
// rows [s*WG, (s+1)*WG) ∩ [0, pos] of key/value head h / (n_head / n_kv) and writes its partial
// result (running max m, sum of weights l, unnormalised output o) for attn_combine. The number
// of splits is fixed when the command is recorded (it covers the whole context); splits past
// the current position return at once and attn_combine reads only the live ones, so nothing is
// re-recorded as the context grows and a long context costs nothing before it is used.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;  // rows per split, one thread per row for the scores

layout(std430, binding = 0) readonly buffer Act { float act[]; };
layout(std430, binding = 1) readonly buffer KCache { uint kc[]; };
layout(std430, binding = 2) readonly buffer VCache { uint vc[]; };
layout(std430, binding = 3) writeonly buffer Part { float part[]; };
layout(std430, binding = 4) readonly buffer Tok { uint tok[]; };

layout(push_constant) uniform Push {
    uint n_head, n_kv, head_dim;
    uint q_off;     // act: prepared queries [n_head][head_dim]
    uint n_split;
    float scale;    // 1/sqrt(head_dim)
} p;

shared float qs[256];
shared float w[WG];
shared float red[WG];

void main() {
    uint h = gl_WorkGroupID.x, s = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
    uint kvh = h / (p.n_head / p.n_kv);
    uint n_rows = tok[0] + 1u;
    uint r0 = s * WG;
    if (r0 >= n_rows) return;  // uniform per workgroup
    uint hd2 = p.head_dim / 2u;
    for (uint i = t; i < p.head_dim; i += WG) qs[i] = act[p.q_off + h * p.head_dim + i];
    barrier();

    uint r = r0 + t;
    bool live = r < n_rows;
    float score = -1.0 / 0.0;
    if (live) {
        uint base = (r * p.n_kv + kvh) * hd2;
        float acc = 0.0;
        for (uint i = 0; i < hd2; ++i) {
            vec2 k = unpackHalf2x16(kc[base + i]);
            acc += k.x * qs[2u * i] + k.y * qs[2u * i + 1u];
        }
        score = acc * p.scale;
    }
    // max over the split
    red[t] = score;
    barrier();
    for (uint st = WG / 2u; st > 0u; st >>= 1) {
        if (t < st) red[t] = max(red[t], red[t + st]);
        barrier();
    }
    float m = red[0];
    barrier();
    float e = live ? exp(score - m) : 0.0;
    w[t] = e;
    red[t] = e;
    barrier();
    for (uint st = WG / 2u; st > 0u; st >>= 1) {
        if (t < st) red[t] += red[t + st];
        barrier();
    }
    float l = red[0];

    uint ob = (h * p.n_split + s) * (p.head_dim + 2u);
    uint n_live = min(WG, n_rows - r0);
    for (uint d = t; d < p.head_dim; d += WG) {
        float o = 0.0;
        for (uint j = 0; j < n_live; ++j) {
            uint idx = ((r0 + j) * p.n_kv + kvh) * hd2 + d / 2u;
            vec2 v = unpackHalf2x16(vc[idx]);
            o += w[j] * ((d & 1u) == 0u ? v.x : v.y);
        }
        part[ob + 2u + d] = o;
    }
    if (t == 0u) {
        part[ob] = m;
        part[ob + 1u] = l;
    }
}
