// Per-row preparation of a Gated DeltaNet window (prefill), workgroup (x, row r): for x < H_k the
// L2 norm of q head x (times 1/sqrt(d_k)), for H_k <= x < 2 H_k that of k head x - H_k, both in
// place in the conv output rows; workgroup x = 2 H_k turns the row's raw beta and alpha into
// beta = sigmoid(b) and the decay exp(softplus(a + dt_bias) · ssm_a), also in place.
//
// Why this shape: the norms need a whole head, so a workgroup per (head, row) reduces in shared
// memory; (2 H_k + 1) × n workgroups keep the GPU busy without any per-row chain. It stays a
// dispatch of its own: folding it into the conv would need whole heads per conv workgroup and
// folding it into the scan would redo each norm in every column slice, for a stage measured at
// 15 us a 512-row window on the H200 (Qwen3.5 0.8B and 9B shapes), 0.03 us a row.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) readonly buffer Params { float prm[]; };

layout(push_constant) uniform Push {
    uint n_k_heads, n_v_heads, d_k;
    uint qkv_off, qkv_row;  // act: conv output rows (q heads, k heads, v heads)
    uint b_off, a_off, ba_row;  // act: raw beta / alpha rows of n_v_heads
    uint dt_off, ssma_off;      // prm
} p;

shared float red[WG];
#include "reduce.glsl"

void main() {
    uint x = gl_WorkGroupID.x, r = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
    if (x < 2u * p.n_k_heads) {
        uint base = p.qkv_off + r * p.qkv_row + x * p.d_k;
        float ss = 0.0;
        for (uint i = t; i < p.d_k; i += WG) ss += act[base + i] * act[base + i];
        // l2norm as the reference: x * rsqrt(sum(x²) + 1e-6); q also scaled by 1/sqrt(d_k)
        float sc = inversesqrt(wg_sum(ss) + 1e-6);
        if (x < p.n_k_heads) sc *= inversesqrt(float(p.d_k));
        for (uint i = t; i < p.d_k; i += WG) act[base + i] *= sc;
    } else {
        for (uint h = t; h < p.n_v_heads; h += WG) {
            uint bi = p.b_off + r * p.ba_row + h, ai = p.a_off + r * p.ba_row + h;
            act[bi] = 1.0 / (1.0 + exp(-act[bi]));
            float a = act[ai] + prm[p.dt_off + h];
            float sp = a > 20.0 ? a : log(1.0 + exp(a));  // softplus, PyTorch's threshold
            act[ai] = exp(sp * prm[p.ssma_off + h]);
        }
    }
}
