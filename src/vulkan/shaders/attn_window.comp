// Causal attention for a window of query rows (prefill) over the F16 KV cache, with an online
// softmax over blocks of WG keys so no score matrix is stored: workgroup (query head h, row r)
// attends to cache rows [0, tok[0] + r] of key/value head h / (n_head / n_kv) (GQA), then
// divides by the softmax sum and, when gate_off is given, multiplies by sigmoid(gate) (the gated
// attention of qwen35). One thread scores one key of a block; the output dims are spread over
// the threads (head_dim <= 256, so at most 4 per thread at WG = 64).
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) readonly buffer KCache { uint kc[]; };
layout(std430, binding = 2) readonly buffer VCache { uint vc[]; };
layout(std430, binding = 3) readonly buffer Tok { uint tok[]; };

layout(push_constant) uniform Push {
    uint n_head, n_kv, head_dim;
    uint q_off;                           // act: prepared queries [n][n_head][head_dim]
    uint o_off, o_row;                    // act: output head h of row r at o_off + r * o_row + h * head_dim
    uint gate_off, gate_stride, gate_row; // act: gate of head h of row r, or gate_off = ~0u
    float scale;                          // 1/sqrt(head_dim)
} p;

shared float qs[256];
shared float w[WG];
shared float red[WG];

const uint DPT = 256 / 64;  // output dims per thread at most (head_dim <= 256, WG >= 64)

void main() {
    uint h = gl_WorkGroupID.x, r = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
    uint kvh = h / (p.n_head / p.n_kv);
    uint n_keys = tok[0] + r + 1u;
    uint hd2 = p.head_dim / 2u;
    uint qb = p.q_off + (r * p.n_head + h) * p.head_dim;
    for (uint i = t; i < p.head_dim; i += WG) qs[i] = act[qb + i];
    barrier();

    float m = -1.0 / 0.0, l = 0.0;
    float o[DPT];
    for (uint i = 0; i < DPT; ++i) o[i] = 0.0;
    for (uint kb = 0; kb < n_keys; kb += WG) {
        uint key = kb + t;
        bool live = key < n_keys;
        float s = -1.0 / 0.0;
        if (live) {
            uint base = (key * p.n_kv + kvh) * hd2;
            float acc = 0.0;
            for (uint i = 0; i < hd2; ++i) {
                vec2 k = unpackHalf2x16(kc[base + i]);
                acc += k.x * qs[2u * i] + k.y * qs[2u * i + 1u];
            }
            s = acc * p.scale;
        }
        red[t] = s;
        barrier();
        for (uint st = WG / 2u; st > 0u; st >>= 1) {
            if (t < st) red[t] = max(red[t], red[t + st]);
            barrier();
        }
        float m_new = max(m, red[0]);  // finite: key kb is always live
        barrier();
        float e = live ? exp(s - m_new) : 0.0;
        w[t] = e;
        red[t] = e;
        barrier();
        for (uint st = WG / 2u; st > 0u; st >>= 1) {
            if (t < st) red[t] += red[t + st];
            barrier();
        }
        float corr = exp(m - m_new);  // 0 on the first block (m = -inf)
        l = l * corr + red[0];
        m = m_new;
        uint n_live = min(WG, n_keys - kb);
        for (uint i = 0; i < DPT; ++i) {
            uint d = t + i * WG;
            if (d >= p.head_dim) break;
            float acc = 0.0;
            for (uint j = 0; j < n_live; ++j) {
                vec2 v = unpackHalf2x16(vc[((kb + j) * p.n_kv + kvh) * hd2 + d / 2u]);
                acc += w[j] * ((d & 1u) == 0u ? v.x : v.y);
            }
            o[i] = o[i] * corr + acc;
        }
        barrier();  // w and red are rewritten by the next block
    }
    for (uint i = 0; i < DPT; ++i) {
        uint d = t + i * WG;
        if (d >= p.head_dim) break;
        float v = o[i] / l;
        if (p.gate_off != 0xffffffffu) {
            float g = act[p.gate_off + r * p.gate_row + h * p.gate_stride + d];
            v *= 1.0 / (1.0 + exp(-g));
        }
        act[p.o_off + r * p.o_row + h * p.head_dim + d] = v;
    }
}
