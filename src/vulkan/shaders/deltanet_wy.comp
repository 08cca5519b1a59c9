// The WY factors of a Gated DeltaNet window's chunks (prefill), the part of the chunked delta
// rule that needs no state, for every chunk at once: workgroup (value head h, chunk c of C rows)
// after deltanet_conv and deltanet_gates. With a_u the decay and β_u the beta of row u of the
// chunk, Γ[t][s] = a_(s+1)···a_t and Γ_t = a_0···a_t:
//   A[t][s] = β_t Γ[t][s] k_t·k_s (s < t),   (I + A) [W | U] = [diag(β_t Γ_t) K | diag(β) V]
//   P[t][s] = Γ[t][s] q_t·k_s (s <= t)
// W (C × d_k), U (C × d_v) and P (C × C) go to the scratch rows at wy_off; deltanet_chunk.comp
// then walks the chunks in order with the state on chip:
//   D = U - W S,  O = diag(Γ_t) Q S + P D,  S = Γ_last S + Kᵀ diag(Γ[last][t]) D
// which is S = a S + k dᵀ, d = β (v - a Sᵀk), o = Sᵀq applied row by row (q, k already
// L2-normed, q scaled; value head h reads q/k head h mod H_k).
//
// Why this shape: everything here is independent between chunks, so the window's n/C × H_v
// workgroups fill the GPU, and the one sequential part of a chunk, the triangular solve, runs
// without a barrier: each thread owns one column of [W | U] and keeps its C values in
// registers (the solve fully unrolled over the constant C), reading A from shared memory as
// broadcasts. The decays are products of the a_u (never ratios of running products), so a decay
// that underflows to zero stays exact instead of turning into 0/0.
//
// Scratch layout (floats from wy_off, n rows each): W at [row][H_v][d_k], then U at
// [row][H_v][d_v], then P at [row][H_v][C] (entries s > t of a row are not written), then the
// decays (Γ_t, Γ[last][t]) at [row][H_v][2], Γ[last][t] = a_(t+1)···a_last.
#version 450
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint DK = 128;  // a multiple of 4
layout(constant_id = 2) const uint C = 32;    // rows a chunk
const uint DV4 = DK / 4u;
const uint DKV = DV4 + 1u;  // padded row stride of the k rows in vec4 (threads on different rows
                            // s read different banks)
const uint CP = C + 1u;     // padded row stride of A

// act is bound twice: binding 0 for the scratch rows written, binding 1 (read-only) for the
// rows read, which this dispatch does not write, so those loads may take the device's read-only
// cache path.
layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) readonly buffer In { float ain[]; };

layout(push_constant) uniform Push {
    uint n_k_heads, n_v_heads, d_v, n;
    uint qkv_off, qkv_row;      // act: normed conv output rows (q heads, k heads, v heads)
    uint b_off, a_off, ba_row;  // act: beta and decay rows
    uint y_off, y_row;          // unread: deltanet_chunk.comp's output rows (shared push)
    uint wy_off;                // act: the scratch rows (see the top)
} p;

shared vec4 ks[C * DKV];  // the chunk's k rows
shared vec4 qs[C * DKV];  // its q rows
shared float tri[C * CP];  // A[t][s] at [t][s], s < t
shared float ga[C];        // decay a_t (1 past the window)
shared float gc[C];        // Γ_t
shared float bt[C];        // β_t (0 past the window)

void main() {
    const uint h = gl_WorkGroupID.x, r0 = gl_WorkGroupID.y * C, tid = gl_LocalInvocationID.x;
    if (r0 >= p.n) return;
    const uint m = min(C, p.n - r0);
    const uint hk = h % p.n_k_heads;
    const uint qb = p.qkv_off + hk * DK, kb = p.qkv_off + (p.n_k_heads + hk) * DK;
    const uint vb = p.qkv_off + 2u * p.n_k_heads * DK + h * p.d_v;
    const uint w_base = p.wy_off, u_base = w_base + p.n * p.n_v_heads * DK;
    const uint p_base = u_base + p.n * p.n_v_heads * p.d_v;
    const uint g_base = p_base + p.n * p.n_v_heads * C;

    for (uint e = tid; e < C * DV4; e += WG) {
        uint t = e / DV4, v = e - t * DV4, at = (r0 + t) * p.qkv_row + 4u * v;
        ks[t * DKV + v] = t < m ? vec4(ain[kb + at], ain[kb + at + 1u], ain[kb + at + 2u],
                                       ain[kb + at + 3u])
                                : vec4(0.0);
        qs[t * DKV + v] = t < m ? vec4(ain[qb + at], ain[qb + at + 1u], ain[qb + at + 2u],
                                       ain[qb + at + 3u])
                                : vec4(0.0);
    }
    for (uint t = tid; t < C; t += WG) {
        ga[t] = t < m ? ain[p.a_off + (r0 + t) * p.ba_row + h] : 1.0;
        bt[t] = t < m ? ain[p.b_off + (r0 + t) * p.ba_row + h] : 0.0;
    }
    barrier();
    for (uint t = tid; t < C; t += WG) {
        float g = 1.0, l = 1.0;
        for (uint u = 0u; u <= t; ++u) g *= ga[u];
        for (uint u = t + 1u; u < m; ++u) l *= ga[u];
        gc[t] = g;
        if (t < m) {
            act[g_base + ((r0 + t) * p.n_v_heads + h) * 2u] = g;
            act[g_base + ((r0 + t) * p.n_v_heads + h) * 2u + 1u] = l;
        }
    }

    // A and P, one (t, s) pair a thread at a time; e numbers the pairs s <= t < m row by row.
    for (uint e = tid; e < m * (m + 1u) / 2u; e += WG) {
        uint t = uint((sqrt(8.0 * float(e) + 1.0) - 1.0) * 0.5);
        if (t * (t + 1u) / 2u > e) --t;  // the rounding of sqrt, either way
        if ((t + 1u) * (t + 2u) / 2u <= e) ++t;
        uint s = e - t * (t + 1u) / 2u;
        vec4 qk = vec4(0.0), kk = vec4(0.0);
        [[unroll]] for (uint v = 0u; v < DV4; ++v) {
            vec4 kv = ks[s * DKV + v];
            qk = fma(qs[t * DKV + v], kv, qk);
            kk = fma(ks[t * DKV + v], kv, kk);
        }
        float g = 1.0;
        for (uint u = s + 1u; u <= t; ++u) g *= ga[u];
        act[p_base + ((r0 + t) * p.n_v_heads + h) * C + s] = g * dot(qk, vec4(1.0));
        if (s < t) tri[t * CP + s] = bt[t] * g * dot(kk, vec4(1.0));
    }
    barrier();

    // (I + A) X = B by forward substitution, a column of [W | U] a thread. Rows t >= m of A are
    // never written and their x never stored; no row below m reads them.
    for (uint j = tid; j < DK + p.d_v; j += WG) {
        float x[C];
        if (j < DK) {
            [[unroll]] for (uint t = 0u; t < C; ++t) x[t] = bt[t] * gc[t] * ks[t * DKV + j / 4u][j & 3u];
        } else {
            [[unroll]] for (uint t = 0u; t < C; ++t)
                x[t] = t < m ? bt[t] * ain[vb + (r0 + t) * p.qkv_row + (j - DK)] : 0.0;
        }
        [[unroll]] for (uint t = 1u; t < C; ++t) {
            float acc = 0.0;
            [[unroll]] for (uint s = 0u; s < t; ++s) acc = fma(tri[t * CP + s], x[s], acc);
            x[t] -= acc;
        }
        if (j < DK) {
            [[unroll]] for (uint t = 0u; t < C; ++t)
                if (t < m) act[w_base + ((r0 + t) * p.n_v_heads + h) * DK + j] = x[t];
        } else {
            [[unroll]] for (uint t = 0u; t < C; ++t)
                if (t < m) act[u_base + ((r0 + t) * p.n_v_heads + h) * p.d_v + (j - DK)] = x[t];
        }
    }
}
