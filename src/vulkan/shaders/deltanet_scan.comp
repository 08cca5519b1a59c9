// The delta rule of a Gated DeltaNet layer over a window of n rows (prefill), after
// deltanet_conv and deltanet_gates: workgroup (value head h, column slice) with one thread per
// value column j keeps column j of the head's state S [d_k][d_v] in registers for the whole
// window (read once, written once), and per row r:
//   S = decay·S + k (beta (v - decay Sᵀk))ᵀ,   o = Sᵀ q   (q, k already L2-normed; q scaled)
// The rows are inherently sequential; the heads and column slices run in parallel. The raw o
// goes to the output rows; deltanet_gated_norm applies the gated RMSNorm afterwards.
// Value head h reads q/k head h mod H_k (GGUF order).
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint COLS = 64;  // value columns per workgroup
layout(constant_id = 1) const uint DK = 128;

layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) buffer State { float S[]; };  // [H_v][d_k][d_v]

layout(push_constant) uniform Push {
    uint n_k_heads, n_v_heads, d_v, n;
    uint qkv_off, qkv_row;      // act: normed conv output rows (q heads, k heads, v heads)
    uint b_off, a_off, ba_row;  // act: beta and decay rows
    uint y_off, y_row;          // act: output rows [n][H_v * d_v]
} p;

shared float qs[DK];
shared float ks[DK];

void main() {
    uint h = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    uint j = gl_WorkGroupID.y * COLS + t;
    uint hk = h % p.n_k_heads;
    uint sb = h * DK * p.d_v + j;
    float s[DK];
    for (uint i = 0; i < DK; ++i) s[i] = S[sb + i * p.d_v];
    for (uint r = 0; r < p.n; ++r) {
        uint row = p.qkv_off + r * p.qkv_row;
        for (uint i = t; i < DK; i += COLS) {
            qs[i] = act[row + hk * DK + i];
            ks[i] = act[row + (p.n_k_heads + hk) * DK + i];
        }
        barrier();
        float v = act[row + 2u * p.n_k_heads * DK + h * p.d_v + j];
        float beta = act[p.b_off + r * p.ba_row + h], decay = act[p.a_off + r * p.ba_row + h];
        float sk = 0.0;
        for (uint i = 0; i < DK; ++i) sk += s[i] * ks[i];
        float d = beta * (v - decay * sk);
        float o = 0.0;
        for (uint i = 0; i < DK; ++i) {
            s[i] = decay * s[i] + ks[i] * d;
            o += s[i] * qs[i];
        }
        act[p.y_off + r * p.y_row + h * p.d_v + j] = o;
        barrier();  // qs/ks are rewritten for the next row
    }
    for (uint i = 0; i < DK; ++i) S[sb + i * p.d_v] = s[i];
}
