// One decode token of a Gated DeltaNet layer, all value heads in one dispatch (workgroup h = value
// head h, thread j = value column j): causal conv over a ring of the last K inputs + SiLU, l2 norm
// of q and k (q scaled by 1/sqrt(d_k)), the beta and decay gates, the delta rule on the F32 state,
// and the gated RMSNorm of the output. Value head h reads q/k head h mod H_k (GGUF order).
//
// The conv ring holds K rows of conv_dim inputs; input t lives in row t mod K, so this token
// writes row pos mod K while every other workgroup reads only the other rows: no race between
// workgroups sharing a q/k head. A fresh session's ring is zero, which is the causal padding.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;   // == d_v
layout(constant_id = 1) const uint DK = 128;
layout(constant_id = 2) const uint KCONV = 4;

layout(std430, binding = 0) buffer Act { float act[]; };             // qkv, z, beta/alpha in; y out
layout(std430, binding = 1) readonly buffer Params { float prm[]; };  // conv taps, dt_bias, ssm_a, norm
layout(std430, binding = 2) buffer Ring { float ring[]; };           // [K][conv_dim]
layout(std430, binding = 3) buffer State { float S[]; };             // [H_v][d_k][d_v]
layout(std430, binding = 4) readonly buffer Tok { uint tok[]; };     // tok[0] = position

layout(push_constant) uniform Push {
    uint n_k_heads;
    uint n_v_heads;
    uint qkv_off;   // act: conv input row (conv_dim)
    uint z_off;     // act: output gate z (H_v * d_v)
    uint b_off;     // act: raw beta (H_v)
    uint a_off;     // act: raw alpha (H_v)
    uint y_off;     // act: output (H_v * d_v)
    uint conv_off;  // prm: conv taps [conv_dim][K]
    uint dt_off;    // prm: dt_bias [H_v]
    uint ssma_off;  // prm: ssm_a [H_v]
    uint norm_off;  // prm: ssm_norm [d_v]
    float eps;      // gated RMSNorm epsilon
} p;

shared float red[WG];
shared float qs[DK];
shared float ks[DK];
#include "reduce.glsl"

float silu(float x) { return x / (1.0 + exp(-x)); }

// Conv output of channel c at this position; the raw input x goes to ring row pos mod K when
// this workgroup owns the channel.
float conv(uint c, uint pos, bool owner) {
    uint conv_dim = 2u * p.n_k_heads * DK + p.n_v_heads * WG;
    float x = act[p.qkv_off + c];
    float s = prm[p.conv_off + c * KCONV + KCONV - 1u] * x;
    for (uint t = 0; t + 1u < KCONV; ++t) {
        // input pos-K+1+t lives in row (pos+1+t) mod K
        s += prm[p.conv_off + c * KCONV + t] * ring[((pos + 1u + t) % KCONV) * conv_dim + c];
    }
    if (owner) ring[(pos % KCONV) * conv_dim + c] = x;
    return silu(s);
}

void main() {
    uint h = gl_WorkGroupID.x;
    uint j = gl_LocalInvocationID.x;
    uint hk = h % p.n_k_heads;
    uint pos = tok[0];
    bool qk_owner = h < p.n_k_heads;  // one workgroup per q/k head stores its raw inputs

    float qq = 0.0, kk = 0.0;
    for (uint i = j; i < DK; i += WG) {
        float q = conv(hk * DK + i, pos, qk_owner);
        float k = conv(p.n_k_heads * DK + hk * DK + i, pos, qk_owner);
        qs[i] = q;
        ks[i] = k;
        qq += q * q;
        kk += k * k;
    }
    float v = conv(2u * p.n_k_heads * DK + h * WG + j, pos, true);
    // l2norm as the reference: x * rsqrt(sum(x²) + 1e-6)
    float qn = inversesqrt(wg_sum(qq) + 1e-6) * inversesqrt(float(DK));
    float kn = inversesqrt(wg_sum(kk) + 1e-6);

    float beta = 1.0 / (1.0 + exp(-act[p.b_off + h]));
    float a = act[p.a_off + h] + prm[p.dt_off + h];
    float sp = a > 20.0 ? a : log(1.0 + exp(a));  // softplus, PyTorch's threshold
    float decay = exp(sp * prm[p.ssma_off + h]);

    uint sb = h * DK * WG + j;  // S[h][i][j] at sb + i * WG
    float sk = 0.0;
    for (uint i = 0; i < DK; ++i) sk += S[sb + i * WG] * ks[i];
    float d = beta * (v - decay * sk * kn);
    float o = 0.0;
    for (uint i = 0; i < DK; ++i) {
        float s = decay * S[sb + i * WG] + ks[i] * kn * d;
        S[sb + i * WG] = s;
        o += s * qs[i];
    }
    o *= qn;

    float ss = wg_sum(o * o);
    float z = act[p.z_off + h * WG + j];
    act[p.y_off + h * WG + j] = o * inversesqrt(ss / float(WG) + p.eps) * prm[p.norm_off + j] * silu(z);
}
