// One decode token of a Gated DeltaNet layer, all value heads in one dispatch: causal conv over a
// ring of the last K inputs + SiLU, l2 norm of q and k (q scaled by 1/sqrt(d_k)), the beta and
// decay gates, the delta rule on the F32 state, and the gated RMSNorm of the output. Value head h
// reads q/k head h mod H_k (GGUF order).
//
// Why it is split this way: the state of one head is d_k x d_v floats (64 KiB at 128 x 128), read
// and written once a token. A workgroup per head (H_v of them, 32 on a 9B) leaves most of a large
// GPU idle and each thread with d_k dependent steps, so the head's value columns are cut into
// groups of CW (workgroup y of the grid) and each column's d_k rows into KS parts: thread t takes
// column t % CW of its group (adjacent threads read adjacent state words) and rows
// part · d_k/KS .. of it, holds those state values in registers between the read and the write,
// and the parts' partial sums meet in shared memory. Every workgroup of a head redoes the head's
// q/k conv (2·d_k channels, cheap).
//
// The gated RMSNorm needs the whole head's output. With one column group the workgroup applies
// it itself. With several, each stores its raw columns to y, makes them available device-wide
// and counts itself on counter[h]; the last to arrive sees every column, normalizes the head in
// place and sets the counter back to 0 for the next dispatch (as gemv.comp's norm epilogue).
//
// NORM_OUT leaves the gated RMSNorm to the GEMV that reads y (gemv.comp GATED_IN): each column
// group stores o · w · silu(z) for its columns and the sum of squares of its o, and no workgroup
// waits for the others. A head's norm factor 1 / sqrt(mean(o²) + eps) is common to its columns,
// so the reader applies it to the scale of each 16-value block it rounds. NORM_OUT 2 stores
// those columns rounded to bytes instead (round_bytes.glsl, the layout gemv_tile.comp reads under
// XMODE 5: block e's four words of bytes at y_off + 4e, its scale and scaled sum at y_off +
// n / 4 + 2e for the n = H_v · d_v values), so the projection's workgroups copy bytes rather
// than each rounding all of y: one thread a 16-column block of the group's columns.
//
// The conv ring holds K rows of conv_dim inputs; input t lives in row t mod K, so this token
// writes row pos mod K and uses only the other rows. Every workgroup reads all K rows of its
// channels (conv_load), so one sharing a q/k head may read row pos mod K while the head's owner
// stores it: that value is never used. A fresh session's ring is zero, which is the causal
// padding.
//
// STATE_BASE 1 (a batch's rows): the binding is the pool of every session's ring and state, and
// this row's lie at float offsets tok[9] and tok[8] (ResidentDriver::kRingBase, kStateBase) of
// its words. Otherwise they start the bindings, and nothing this kernel reads before the state
// waits for tok. Workgroup z is the row: every row of a batch in one dispatch, row r's words at
// tok[r · tok_row], its counters at counter[r · counter_row] and its activations r rows on (a
// conv input row, H_v · d_v gate and output values, H_v betas and alphas a row).
#version 450

#extension GL_EXT_control_flow_attributes : enable
#if defined(SUBGROUP)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;   // == CW * KS
layout(constant_id = 1) const uint DK = 128;
layout(constant_id = 2) const uint KCONV = 4;
layout(constant_id = 3) const uint DV = 128;   // value head size
layout(constant_id = 4) const uint CW = 128;   // value columns a workgroup (divides DV)
layout(constant_id = 5) const uint KS = 1;     // parts of a column's d_k rows (divides DK)
// 1: the reader applies the gated norm (above); 2: so, over y rounded here (CW a multiple of 16).
layout(constant_id = 6) const uint NORM_OUT = 0;
layout(constant_id = 7) const uint STATE_BASE = 0;

const uint KR = DK / KS;  // state rows a thread holds

layout(std430, binding = 0) coherent buffer Act { float act[]; };    // qkv, z, beta/alpha in; y out
layout(std430, binding = 0) coherent buffer ActU { uint act_u[]; };  // NORM_OUT 2: y's bytes
layout(std430, binding = 1) readonly buffer Params { float prm[]; };  // conv taps, dt_bias, ssm_a, norm
layout(std430, binding = 2) buffer Ring { float ring[]; };           // [K][conv_dim]
layout(std430, binding = 3) buffer State { float S[]; };             // [H_v][d_k][d_v]
layout(std430, binding = 4) readonly buffer Tok { uint tok[]; };     // tok[0] = position
layout(std430, binding = 5) buffer Counter { uint counter[]; };      // [H_v], 0 between dispatches

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
    uint ss_off;    // NORM_OUT: act, each column group's sum of squares of o ([H_v][DV / CW])
    uint tok_row;      // words from one row's tok words to the next's (workgroup z: the row)
    uint counter_row;  // words from one row's counters to the next's
} p;

shared float red[WG];
shared float qs[DK];
shared float ks[DK];
shared float part_sum[2][KS][CW];  // one set of partials for each of the two column sums
shared uint last_group;
shared float gated[CW];  // NORM_OUT 2: the group's columns, for their rounding
#include "reduce.glsl"
#define ROUND_ONLY
#define ROUND_TO_ACT
#include "round_bytes.glsl"

float silu(float x) { return x / (1.0 + exp(-x)); }

uint ring_base = 0u;  // STATE_BASE: where this row's ring and state start in their pools
uint qkv_off = 0u;    // this row's conv input row in act

// A conv channel's inputs: its raw input x this token, every one of the ring's K rows and its K
// taps. All of them are requested before any is used, none depends on the position (read from
// tok), and the ring's new row is stored only after them (a load after a store to the same
// buffer waits for the store): with the conv's inputs cold in memory, the loads of the q, k and
// v channels took three round trips in turn.
void conv_load(uint c, uint conv_dim, out float x, out float rows[KCONV], out float taps[KCONV]) {
    x = act[qkv_off + c];
    [[unroll]] for (uint r = 0u; r < KCONV; ++r) {
        rows[r] = ring[ring_base + r * conv_dim + c];
        taps[r] = prm[p.conv_off + c * KCONV + r];
    }
}

// The conv + SiLU of a channel at this position from its inputs. Input pos - K + 1 + t lives in
// ring row (pos + 1 + t) mod K, so row r takes tap t = (r - pos - 1) mod K, and the row with t =
// K - 1 (row pos mod K) is the one this token replaces by x: read, never used (its owner may be
// storing x there now).
float conv_out(float x, float rows[KCONV], float taps[KCONV], uint pos) {
    float s = taps[KCONV - 1u] * x;
    uint r0 = (pos + 1u) % KCONV;
    [[unroll]] for (uint r = 0u; r < KCONV; ++r) {
        uint t = (r + KCONV - r0) % KCONV;
        float tap = 0.0;
        [[unroll]] for (uint u = 0u; u + 1u < KCONV; ++u) tap = t == u ? taps[u] : tap;
        s += t + 1u < KCONV ? tap * rows[r] : 0.0;
    }
    return silu(s);
}

// The sum over the KS parts of each column (every thread gets its column's total). Each of the
// two sums a dispatch takes (which = 0, 1) has partials of its own, so none waits for the reads
// of the one before.
float column_sum(float v, uint col, uint part, uint which) {
    if (KS == 1u) return v;
    part_sum[which][part][col] = v;
    barrier();
    float s = 0.0;
    for (uint i = 0; i < KS; ++i) s += part_sum[which][i][col];
    return s;
}

void main() {
    uint h = gl_WorkGroupID.x, cg = gl_WorkGroupID.y;
    uint t = gl_LocalInvocationID.x;
    uint col = t % CW, part = t / CW;
    uint j = cg * CW + col;  // value column within the head
    uint hk = h % p.n_k_heads;
    // This row's (b's) words, counters and activations.
    const uint b = gl_WorkGroupID.z, words = b * p.tok_row, counters = b * p.counter_row;
    const uint inner = p.n_v_heads * DV;
    qkv_off = p.qkv_off + b * (2u * p.n_k_heads * DK + inner);
    const uint z_off = p.z_off + b * inner, y_off = p.y_off + b * inner;
    const uint b_off = p.b_off + b * p.n_v_heads, a_off = p.a_off + b * p.n_v_heads;
    uint pos = tok[words];
    const uint state_base = STATE_BASE != 0u ? tok[words + 8u] : 0u;
    ring_base = STATE_BASE != 0u ? tok[words + 9u] : 0u;
    // One workgroup per q/k head stores its raw inputs.
    bool qk_owner = h < p.n_k_heads && cg == 0u;
    // NORM_OUT: the column's gate input, requested now so its latency passes under the conv.
    float gz = NORM_OUT != 0u ? act[z_off + h * DV + j] : 0.0;
    // The state values this thread updates and the gates' inputs, requested now too: none of
    // them depends on the conv (H200, Qwen3.5-9B decode, deltanet 200 -> 195 us a token,
    // docs/PERF.md 2026-12-03).
    uint i0 = part * KR;
    uint sb = state_base + h * DK * DV + i0 * DV + j;  // S[h][i0 + r][j] at sb + r * DV
    float sv[KR];
    [[unroll]] for (uint r = 0; r < KR; ++r) sv[r] = S[sb + r * DV];
    float braw = act[b_off + h];
    float a = act[a_off + h] + prm[p.dt_off + h];
    float ssa = prm[p.ssma_off + h];

    // The conv's inputs (conv_load): v's channel, then this thread's q and k channels.
    uint conv_dim = 2u * p.n_k_heads * DK + p.n_v_heads * DV, row = pos % KCONV;
    uint cv = 2u * p.n_k_heads * DK + h * DV + j;
    float xv, rv[KCONV], tv[KCONV];
    conv_load(cv, conv_dim, xv, rv, tv);
    float qq = 0.0, kk = 0.0;
    for (uint i = t; i < DK; i += WG) {
        uint cq = hk * DK + i, ck = p.n_k_heads * DK + cq;
        float xq, rq[KCONV], tq[KCONV], xk, rk[KCONV], tk[KCONV];
        conv_load(cq, conv_dim, xq, rq, tq);
        conv_load(ck, conv_dim, xk, rk, tk);
        float q = conv_out(xq, rq, tq, pos), k = conv_out(xk, rk, tk, pos);
        if (qk_owner) {
            ring[ring_base + row * conv_dim + cq] = xq;
            ring[ring_base + row * conv_dim + ck] = xk;
        }
        qs[i] = q;
        ks[i] = k;
        qq += q * q;
        kk += k * k;
    }
    float v = conv_out(xv, rv, tv, pos);
    if (part == 0u) ring[ring_base + row * conv_dim + cv] = xv;
    // l2norm as the reference: x * rsqrt(sum(x²) + 1e-6)
    vec2 qk = wg_sum2(vec2(qq, kk));
    float qn = inversesqrt(qk.x + 1e-6) * inversesqrt(float(DK));
    float kn = inversesqrt(qk.y + 1e-6);

    float beta = 1.0 / (1.0 + exp(-braw));
    float sp = a > 20.0 ? a : log(1.0 + exp(a));  // softplus, PyTorch's threshold
    float decay = exp(sp * ssa);

    float sk = 0.0;
    [[unroll]] for (uint r = 0; r < KR; ++r) sk += sv[r] * ks[i0 + r];
    sk = column_sum(sk, col, part, 0u);
    float d = beta * (v - decay * sk * kn);
    float o = 0.0;
    [[unroll]] for (uint r = 0; r < KR; ++r) {
        float s = decay * sv[r] + ks[i0 + r] * kn * d;
        S[sb + r * DV] = s;
        o += s * qs[i0 + r];
    }
    o = column_sum(o, col, part, 1u) * qn;

    if (NORM_OUT != 0u) {
        float g = o * prm[p.norm_off + j] * silu(gz);
        if (NORM_OUT == 1u && part == 0u) act[y_off + h * DV + j] = g;
        if (NORM_OUT == 2u && part == 0u) gated[col] = g;
        float ss = wg_sum(part == 0u ? o * o : 0.0);  // (its barriers publish `gated`)
        if (t == 0u) act[p.ss_off + h * (DV / CW) + cg] = ss;
        if (NORM_OUT == 2u && t < CW / 16u) {
            vec4 v[4];
            [[unroll]] for (uint i = 0u; i < 4u; ++i)
                v[i] = vec4(gated[16u * t + 4u * i], gated[16u * t + 4u * i + 1u],
                            gated[16u * t + 4u * i + 2u], gated[16u * t + 4u * i + 3u]);
            store_rounded_block(v, y_off, p.n_v_heads * DV, (h * DV + cg * CW) / 16u + t);
        }
        return;
    }
    if (CW == DV) {  // the whole head is here
        float ss = wg_sum(part == 0u ? o * o : 0.0);
        if (part == 0u) {
            float z = act[z_off + h * DV + j];
            act[y_off + h * DV + j] =
                o * inversesqrt(ss / float(DV) + p.eps) * prm[p.norm_off + j] * silu(z);
        }
        return;
    }
    // Release this group's raw columns, count it; the head's last group normalizes (see the top).
    if (part == 0u) act[y_off + h * DV + j] = o;
    memoryBarrierBuffer();
    barrier();
    if (t == 0u) last_group = atomicAdd(counter[counters + h], 1u) == DV / CW - 1u ? 1u : 0u;
    barrier();
    if (last_group == 0u) return;
    memoryBarrierBuffer();  // acquire: the other groups' columns
    float ss = 0.0;
    for (uint c = t; c < DV; c += WG) {
        float x = act[y_off + h * DV + c];
        ss += x * x;
    }
    float scale = inversesqrt(wg_sum(ss) / float(DV) + p.eps);
    for (uint c = t; c < DV; c += WG) {
        uint y = y_off + h * DV + c;
        act[y] = act[y] * scale * prm[p.norm_off + c] * silu(act[z_off + h * DV + c]);
    }
    if (t == 0u) atomicExchange(counter[counters + h], 0u);
}
