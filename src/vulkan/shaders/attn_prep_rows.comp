// Attention input preparation for a window of n rows (prefill), every head of every row in one
// dispatch (workgroup (head, row)): optional per-head RMSNorm of q and k (qwen3/qwen35), rotary
// embedding of the first n_rot dims at position tok[0] + row (NeoX pairs (j, j + n_rot/2), or
// interleaved pairs (2j, 2j + 1) for llama), then q to the query rows and k, v to cache row
// tok[0] + row as F16 (packed in pairs, so no 16-bit storage feature is needed).
// Workgroups x < n_head are query heads, the next n_kv are key/value heads.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) readonly buffer Params { float prm[]; };
layout(std430, binding = 2) buffer KCache { uint kc[]; };
layout(std430, binding = 3) buffer VCache { uint vc[]; };
layout(std430, binding = 4) readonly buffer Tok { uint tok[]; };
#include "kv_pages.glsl"

layout(push_constant) uniform Push {
    uint n_head, n_kv, head_dim;
    uint q_off, q_stride, q_row;  // act: query head h of row r at q_off + r * q_row + h * q_stride
    uint k_off, v_off, kv_row;    // act: key / value head j of row r at k_off + r * kv_row + j * head_dim
    uint qo_off;                  // act: prepared queries [n][n_head][head_dim]
    uint qn_off, kn_off;          // prm: q / k norm weights (head_dim), or ~0u for none
    uint freq_off;                // prm: inverse frequencies (n_rot / 2)
    uint n_rot;
    float eps;
    uint interleaved;
} p;

shared float red[WG];
shared float xs[512];  // [0, 256): normed head, [256, 512): rotated head (head_dim <= 256)
#include "reduce.glsl"

void main() {
    uint hh = gl_WorkGroupID.x, r = gl_WorkGroupID.y;
    uint t = gl_LocalInvocationID.x;
    uint pos = tok[0] + r;
    bool is_q = hh < p.n_head;
    uint j = is_q ? hh : hh - p.n_head;
    uint src = is_q ? p.q_off + r * p.q_row + j * p.q_stride : p.k_off + r * p.kv_row + j * p.head_dim;
    uint nw = is_q ? p.qn_off : p.kn_off;

    float ss = 0.0;
    for (uint i = t; i < p.head_dim; i += WG) {
        float x = act[src + i];
        xs[i] = x;
        ss += x * x;
    }
    float tot = wg_sum(ss);  // every thread takes part, normed or not (uniform control flow)
    if (nw != 0xffffffffu) {
        float scale = inversesqrt(tot / float(p.head_dim) + p.eps);
        for (uint i = t; i < p.head_dim; i += WG) xs[i] *= scale * prm[nw + i];
    }
    barrier();

    uint half_rot = p.n_rot / 2u;
    for (uint i = t; i < p.head_dim; i += WG) {
        float y = xs[i];
        if (i < p.n_rot) {
            bool first = p.interleaved != 0u ? (i & 1u) == 0u : i < half_rot;
            uint pair = p.interleaved != 0u ? i / 2u : (first ? i : i - half_rot);
            uint partner = p.interleaved != 0u ? (first ? i + 1u : i - 1u) : (first ? i + half_rot : i - half_rot);
            float ang = float(pos) * prm[p.freq_off + pair];
            float c = cos(ang), s = sin(ang);
            y = xs[i] * c + (first ? -s : s) * xs[partner];
        }
        xs[i + 256u] = y;
    }
    barrier();
    if (is_q) {
        uint ob = p.qo_off + (r * p.n_head + j) * p.head_dim;
        for (uint i = t; i < p.head_dim; i += WG) act[ob + i] = xs[i + 256u];
    } else {
        uint row = (kv_row(pos) * p.n_kv + j) * (p.head_dim / 2u);
        uint vb = p.v_off + r * p.kv_row + j * p.head_dim;
        for (uint i = t; i < p.head_dim / 2u; i += WG) {
            kc[row + i] = packHalf2x16(vec2(xs[256u + 2u * i], xs[256u + 2u * i + 1u]));
            vc[row + i] = packHalf2x16(vec2(act[vb + 2u * i], act[vb + 2u * i + 1u]));
        }
    }
}
