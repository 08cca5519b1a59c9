// One decode token of a Gated DeltaNet layer, all value heads in one dispatch (workgroup h = value
// head h): causal conv over a ring of the last K inputs + SiLU, l2 norm of q and k (q scaled by
// 1/sqrt(d_k)), the beta and decay gates, the delta rule on the F32 state, and the gated RMSNorm
// of the output. Value head h reads q/k head h mod H_k (GGUF order).
//
// Thread (part, j) owns value column j and the state rows [part·d_k/SPLIT, (part+1)·d_k/SPLIT):
// the columns of the delta rule are independent, and splitting d_k over SPLIT threads per column
// puts SPLIT times more loads of the state in flight than a thread per column (decode waits on
// those loads). The partial products S·k and S·q are summed across the parts in shared memory.
//
// The conv ring holds K rows of conv_dim inputs; input t lives in row t mod K, so this token
// writes row pos mod K while every other workgroup reads only the other rows: no race between
// workgroups sharing a q/k head. A fresh session's ring is zero, which is the causal padding.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;   // d_v · SPLIT threads, a power of two
layout(constant_id = 1) const uint DK = 128;
layout(constant_id = 2) const uint KCONV = 4;
layout(constant_id = 3) const uint DV = 128;   // value head size
const uint SPLIT = WG / DV;                     // divides DK

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
shared float parts[WG];  // per-thread partial sums, [part][j]
shared float ds[DV];     // the delta-rule correction of each column
#include "reduce.glsl"

float silu(float x) { return x / (1.0 + exp(-x)); }

// Conv output of channel c at this position; the raw input x goes to ring row pos mod K when
// this workgroup owns the channel.
float conv(uint c, uint pos, bool owner) {
    uint conv_dim = 2u * p.n_k_heads * DK + p.n_v_heads * DV;
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
    uint lid = gl_LocalInvocationID.x, j = lid % DV, part = lid / DV;
    uint hk = h % p.n_k_heads;
    uint pos = tok[0];
    bool qk_owner = h < p.n_k_heads;  // one workgroup per q/k head stores its raw inputs

    float qq = 0.0, kk = 0.0;
    for (uint i = lid; i < DK; i += WG) {
        float q = conv(hk * DK + i, pos, qk_owner);
        float k = conv(p.n_k_heads * DK + hk * DK + i, pos, qk_owner);
        qs[i] = q;
        ks[i] = k;
        qq += q * q;
        kk += k * k;
    }
    float v = part == 0u ? conv(2u * p.n_k_heads * DK + h * DV + j, pos, true) : 0.0;
    // l2norm as the reference: x * rsqrt(sum(x²) + 1e-6)
    float qn = inversesqrt(wg_sum(qq) + 1e-6) * inversesqrt(float(DK));
    float kn = inversesqrt(wg_sum(kk) + 1e-6);

    float beta = 1.0 / (1.0 + exp(-act[p.b_off + h]));
    float a = act[p.a_off + h] + prm[p.dt_off + h];
    float sp = a > 20.0 ? a : log(1.0 + exp(a));  // softplus, PyTorch's threshold
    float decay = exp(sp * prm[p.ssma_off + h]);

    const uint rows = DK / SPLIT;
    uint i0 = part * rows;
    uint sb = h * DK * DV + j;  // S[h][i][j] at sb + i * DV
    float sk = 0.0;
    for (uint i = i0; i < i0 + rows; ++i) sk += S[sb + i * DV] * ks[i];
    parts[lid] = sk;
    barrier();
    if (part == 0u) {
        float t = 0.0;
        for (uint q = 0; q < SPLIT; ++q) t += parts[q * DV + j];
        ds[j] = beta * (v - decay * t * kn);
    }
    barrier();
    float d = ds[j];
    float o = 0.0;
    for (uint i = i0; i < i0 + rows; ++i) {
        float s = decay * S[sb + i * DV] + ks[i] * kn * d;
        S[sb + i * DV] = s;
        o += s * qs[i];
    }
    parts[lid] = o;
    barrier();
    o = 0.0;
    if (part == 0u) {
        for (uint q = 0; q < SPLIT; ++q) o += parts[q * DV + j];
        o *= qn;
    }

    float ss = wg_sum(o * o);  // parts > 0 hold o = 0
    if (part == 0u) {
        float z = act[p.z_off + h * DV + j];
        act[p.y_off + h * DV + j] =
            o * inversesqrt(ss / float(DV) + p.eps) * prm[p.norm_off + j] * silu(z);
    }
}
