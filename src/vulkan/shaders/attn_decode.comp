// Decode attention, split over the KV length: workgroup (query head h, split s) attends to cache
// rows [s*WG, (s+1)*WG) ∩ [0, pos] of key/value head h / (n_head / n_kv) and writes its partial
// result (running max m, sum of weights l, unnormalised output o). The number of splits is fixed
// when the command is recorded (it covers the whole context); splits past the current position
// return at once and only the live ones are merged, so nothing is re-recorded as the context
// grows and a long context costs nothing before it is used.
//
// The merge needs no stage of its own: each live split, its partial stored and made available
// device-wide, counts itself on counter[h]; the last of head h to arrive merges the head's
// partials (with M the largest split max, o = Σ e^(m_s - M) o_s / Σ e^(m_s - M) l_s), multiplies
// by sigmoid(gate) when gate_off is given (qwen35's gated attention), writes the head's output
// and sets the counter back to 0 for the next dispatch (as gemv.comp's norm epilogue).
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

layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) readonly buffer KCache { uint kc[]; };
layout(std430, binding = 1) readonly buffer KCache4 { uvec4 kc4[]; };
layout(std430, binding = 2) readonly buffer VCache { uint vc[]; };
layout(std430, binding = 3) coherent buffer Part { float part[]; };
layout(std430, binding = 4) readonly buffer Tok { uint tok[]; };
layout(std430, binding = 5) buffer Counter { uint counter[]; };  // [n_head], 0 between dispatches

layout(push_constant) uniform Push {
    uint n_head, n_kv, head_dim;
    uint q_off;     // act: prepared queries [n_head][head_dim]
    uint n_split;
    float scale;    // 1/sqrt(head_dim)
    uint gate_off, gate_stride;  // act: gate of head h at gate_off + h * gate_stride; ~0u: none
    uint o_off;                  // act: output [n_head][head_dim]
} p;

shared vec2 qs[HD2];
shared float w[WG];
shared float red[WG];
shared uint last_split;

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

    // Release the partial, count this split; the head's last live split merges (see the top).
    memoryBarrierBuffer();
    barrier();
    uint n_live_splits = min((n_rows + WG - 1u) / WG, p.n_split);
    if (t == 0u) last_split = atomicAdd(counter[h], 1u) == n_live_splits - 1u ? 1u : 0u;
    barrier();
    if (last_split == 0u) return;
    memoryBarrierBuffer();  // acquire: the other splits' partials
    uint stride = HD + 2u, base = h * p.n_split * stride;
    float M = -1.0 / 0.0;
    for (uint i = 0; i < n_live_splits; ++i) M = max(M, part[base + i * stride]);
    float L = 0.0;
    for (uint i = 0; i < n_live_splits; ++i) L += exp(part[base + i * stride] - M) * part[base + i * stride + 1u];
    for (uint d = t; d < HD; d += WG) {
        float o = 0.0;
        for (uint i = 0; i < n_live_splits; ++i)
            o += exp(part[base + i * stride] - M) * part[base + i * stride + 2u + d];
        o /= L;
        if (p.gate_off != 0xffffffffu) o *= 1.0 / (1.0 + exp(-act[p.gate_off + h * p.gate_stride + d]));
        act[p.o_off + h * HD + d] = o;
    }
    if (t == 0u) atomicExchange(counter[h], 0u);
}
