// Decode attention, split over the KV length: workgroup (query head h, split s) attends to cache
// rows [s*WG, (s+1)*WG) ∩ [0, pos] of key/value head h / (n_head / n_kv) and writes its partial
// result (running max m, sum of weights l, unnormalised output o) for attn_combine. The number
// of splits is fixed when the command is recorded (it covers the whole context); splits past
// the current position return at once and attn_combine reads only the live ones, so nothing is
// re-recorded as the context grows and a long context costs nothing before it is used.
//
// The loops are built around load latency (decode runs a handful of these workgroups per head at
// short context, so each one's critical path is the layer's): the head size is a specialization
// constant, a key row is read as 16-byte vectors with every load of the row in flight at once,
// and the weighted sum over the split's value rows goes in unrolled steps of 8 rows whose loads
// are independent (a row past the live ones is read clamped to the last live row and weighted 0).
#version 450

#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;   // rows per split, one thread per row for the scores
layout(constant_id = 1) const uint HD = 128;  // head_dim (even)

const uint HD2 = HD / 2u;  // words (F16 pairs) of a cache row of one head
const uint HD8 = HD2 >= 4u ? HD2 / 4u : 1u;  // its 16-byte vectors (at least one declared)

layout(std430, binding = 0) readonly buffer Act { float act[]; };
layout(std430, binding = 1) readonly buffer KCache { uint kc[]; };
layout(std430, binding = 1) readonly buffer KCache4 { uvec4 kc4[]; };
layout(std430, binding = 2) readonly buffer VCache { uint vc[]; };
layout(std430, binding = 3) writeonly buffer Part { float part[]; };
layout(std430, binding = 4) readonly buffer Tok { uint tok[]; };

layout(push_constant) uniform Push {
    uint n_head, n_kv, head_dim;
    uint q_off;     // act: prepared queries [n_head][head_dim]
    uint n_split;
    float scale;    // 1/sqrt(head_dim)
} p;

shared vec2 qs[HD2];
shared float w[WG];
shared float red[WG];

float dot_word(uint k, uint i) { return dot(unpackHalf2x16(k), qs[i]); }

void main() {
    uint h = gl_WorkGroupID.x, s = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
    uint kvh = h / (p.n_head / p.n_kv);
    uint n_rows = tok[0] + 1u;
    uint r0 = s * WG;
    if (r0 >= n_rows) return;  // uniform per workgroup
    for (uint i = t; i < HD2; i += WG)
        qs[i] = vec2(act[p.q_off + h * HD + 2u * i], act[p.q_off + h * HD + 2u * i + 1u]);
    barrier();

    uint r = r0 + t;
    bool live = r < n_rows;
    float score = -1.0 / 0.0;
    if (live) {
        uint base = (r * p.n_kv + kvh) * HD2;
        float acc = 0.0;
        if (HD2 % 4u == 0u) {  // rows start 16-byte aligned: vector loads, all in flight
            uvec4 k[HD8];
            [[unroll]] for (uint i = 0; i < HD8; ++i) k[i] = kc4[base / 4u + i];
            [[unroll]] for (uint i = 0; i < HD8; ++i)
                acc += dot_word(k[i].x, 4u * i) + dot_word(k[i].y, 4u * i + 1u) +
                       dot_word(k[i].z, 4u * i + 2u) + dot_word(k[i].w, 4u * i + 3u);
        } else {
            [[unroll]] for (uint i = 0; i < HD2; ++i) acc += dot_word(kc[base + i], i);
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

    uint ob = (h * p.n_split + s) * (HD + 2u);
    uint n_live = min(WG, n_rows - r0);
    for (uint i = t; i < HD2; i += WG) {  // word i: dims 2i, 2i+1
        vec2 o = vec2(0.0);
        for (uint j0 = 0; j0 < n_live; j0 += 8u) {
            vec2 v[8];
            [[unroll]] for (uint u = 0; u < 8u; ++u) {
                uint j = min(j0 + u, n_live - 1u);
                v[u] = unpackHalf2x16(vc[((r0 + j) * p.n_kv + kvh) * HD2 + i]);
            }
            [[unroll]] for (uint u = 0; u < 8u; ++u)
                o += (j0 + u < n_live ? w[min(j0 + u, WG - 1u)] : 0.0) * v[u];
        }
        part[ob + 2u + 2u * i] = o.x;
        part[ob + 3u + 2u * i] = o.y;
    }
    if (t == 0u) {
        part[ob] = m;
        part[ob + 1u] = l;
    }
}
