// Merges the split partials of attn_decode into each head's output: with M the largest split
// max, o = Σ e^(m_s - M) o_s / Σ e^(m_s - M) l_s over the splits that hold cache rows at the
// current position tok[0] (the others are not written). Optionally multiplies by sigmoid(gate)
// (the gated attention of qwen35, whose gate sits per head after the query in the q projection).
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

layout(std430, binding = 0) readonly buffer Part { float part[]; };
layout(std430, binding = 1) buffer Act { float act[]; };
layout(std430, binding = 2) readonly buffer Tok { uint tok[]; };

layout(push_constant) uniform Push {
    uint head_dim, n_split;       // n_split: the stride of the partials (splits recorded)
    uint split_rows;              // cache rows a split
    uint gate_off, gate_stride;  // act: gate of head h at gate_off + h * gate_stride; ~0u: no gate
    uint o_off;                  // act: output [n_head][head_dim]
} p;

void main() {
    uint h = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    uint stride = p.head_dim + 2u;
    uint base = h * p.n_split * stride;
    uint live = min(tok[0] / p.split_rows + 1u, p.n_split);
    float M = -1.0 / 0.0;
    for (uint s = 0; s < live; ++s) M = max(M, part[base + s * stride]);
    float L = 0.0;
    for (uint s = 0; s < live; ++s) L += exp(part[base + s * stride] - M) * part[base + s * stride + 1u];
    for (uint d = t; d < p.head_dim; d += WG) {
        float o = 0.0;
        for (uint s = 0; s < live; ++s)
            o += exp(part[base + s * stride] - M) * part[base + s * stride + 2u + d];
        o /= L;
        if (p.gate_off != 0xffffffffu) {
            float g = act[p.gate_off + h * p.gate_stride + d];
            o *= 1.0 / (1.0 + exp(-g));
        }
        act[p.o_off + h * p.head_dim + d] = o;
    }
}
