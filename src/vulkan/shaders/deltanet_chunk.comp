// The delta rule of a Gated DeltaNet layer over a window of n rows (prefill) in its chunked (WY)
// form, after deltanet_conv and deltanet_gates: workgroup (value head h, slice of COLS value
// columns) walks the rows in chunks of C, with the state slice S0 [d_k][COLS] in shared memory
// from the first row of the window to the last. Inside a chunk, with a_u the decay of row u,
// Γ[t][s] = a_(s+1)···a_t (the decay from row s to row t), Γ_t = a_0···a_t and beta β:
//   A[t][s] = β_t Γ[t][s] k_t·k_s  (s < t),   T = (I + A)^-1
//   W = T diag(β_t Γ_t) K,   U = T diag(β) V     (the WY factors, by forward substitution)
//   D = U - W S0             (row t of D is the d_t of the one-row recurrence)
//   O = diag(Γ_t) Q S0 + (Γ ⊙ Q Kᵀ, s <= t) D
//   S = Γ_last S0 + (diag(Γ[last][s]) K)ᵀ D
// which is exactly S = a S + k dᵀ, d = β (v - a Sᵀk), o = Sᵀq of deltanet_scan.comp applied row
// by row (q, k already L2-normed, q scaled; value head h reads q/k head h mod H_k). The raw o
// goes to the output rows; gated_norm applies the gated RMSNorm afterwards.
//
// Why this shape: the token scan's time is n × the latency of one row's dependent chain. Here
// a chunk is a handful of small dense products that every thread of the workgroup shares, and
// the only sequential part is the triangular solve (C - 1 steps of one short dot per column).
// The decays are products of the a_u (never ratios of running products), so a decay that
// underflows to zero stays exact instead of turning into 0/0. The matrices live in shared
// memory only: no subgroup operations, so nothing depends on the subgroup size; the launcher
// picks C (64, 32 or 16) and COLS (16 or 8) from the shared memory the device reports. Rows of
// q/k/W are padded to DK + 1 floats so that threads reading one column of different rows hit
// different banks. Every value-column slice redoes A and W (their cost does not depend on COLS).
//
// Arithmetic per chunk and workgroup (FMAs): Γ⊙QKᵀ and A C(C+1)/2 × 2 DK, the solve
// C(C-1)/2 × (DK + COLS), Q S0 and W S0 and the state update C × DK × COLS each, the intra-chunk
// output C(C+1)/2 × COLS.
#version 450
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint DK = 128;
layout(constant_id = 2) const uint C = 32;     // rows a chunk
layout(constant_id = 3) const uint COLS = 16;  // value columns a workgroup
const uint DKP = DK + 1u;                      // padded row stride of q, k and W
const uint CP = C + 1u;                        // padded row stride of the C × C matrix

layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) buffer State { float S[]; };  // [H_v][d_k][d_v]

layout(push_constant) uniform Push {
    uint n_k_heads, n_v_heads, d_v, n;
    uint qkv_off, qkv_row;      // act: normed conv output rows (q heads, k heads, v heads)
    uint b_off, a_off, ba_row;  // act: beta and decay rows
    uint y_off, y_row;          // act: output rows [n][H_v * d_v]
} p;

shared float ss[DK * COLS];  // the state slice S[i][column]
shared float qw[C * DKP];    // the chunk's q rows, then the rows of W
shared float ks[C * DKP];    // the chunk's k rows
// Γ ⊙ QKᵀ on and below the diagonal at [t][s]; A strictly above it, transposed, at [s][t].
shared float tri[C * CP];
shared float ud[C * COLS];  // β v, then U after the solve, then D
shared float ga[C];         // decay a_t
shared float gc[C];         // Γ_t: decay from the chunk's start through row t
shared float gl[C];         // Γ[last][t]: decay from row t to the chunk's last row
shared float bt[C];         // beta

const uint NO = (C * COLS + WG - 1u) / WG;  // (row, column) outputs a thread holds

void main() {
    const uint h = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
    const uint c0 = gl_WorkGroupID.y * COLS, ncols = min(COLS, p.d_v - c0);
    const uint hk = h % p.n_k_heads;
    const uint sb = h * DK * p.d_v + c0;
    for (uint e = tid; e < DK * COLS; e += WG) {
        uint i = e / COLS, jl = e - i * COLS;
        ss[e] = jl < ncols ? S[sb + i * p.d_v + jl] : 0.0;
    }
    const uint qb = p.qkv_off + hk * DK, kb = p.qkv_off + (p.n_k_heads + hk) * DK;
    const uint vb = p.qkv_off + 2u * p.n_k_heads * DK + h * p.d_v + c0;
    float y[NO];  // the inter-chunk part Γ_t q_t S0 of this thread's outputs

    for (uint r0 = 0u; r0 < p.n; r0 += C) {
        const uint m = min(C, p.n - r0);
        barrier();  // the previous chunk is done with every shared array
        for (uint e = tid; e < C * DK; e += WG) {
            uint t = e / DK, i = e - t * DK, row = (r0 + t) * p.qkv_row;
            bool ok = t < m;
            qw[t * DKP + i] = ok ? act[qb + row + i] : 0.0;
            ks[t * DKP + i] = ok ? act[kb + row + i] : 0.0;
        }
        for (uint t = tid; t < C; t += WG) {
            bool ok = t < m;
            ga[t] = ok ? act[p.a_off + (r0 + t) * p.ba_row + h] : 1.0;
            bt[t] = ok ? act[p.b_off + (r0 + t) * p.ba_row + h] : 0.0;
        }
        barrier();
        for (uint e = tid; e < C * COLS; e += WG) {
            uint t = e / COLS, jl = e - t * COLS;
            bool ok = t < m && jl < ncols;
            ud[e] = ok ? bt[t] * act[vb + (r0 + t) * p.qkv_row + jl] : 0.0;
        }
        for (uint t = tid; t < C; t += WG) {
            float a = 1.0, b = 1.0;
            for (uint u = 0u; u <= t; ++u) a *= ga[u];
            for (uint u = t + 1u; u < m; ++u) b *= ga[u];
            gc[t] = a;
            gl[t] = b;
        }
        barrier();

        // Γ ⊙ QKᵀ and A, one (t, s) pair a thread at a time; e numbers the pairs s <= t < m
        // row by row, so no thread idles on the upper triangle.
        for (uint e = tid; e < m * (m + 1u) / 2u; e += WG) {
            uint t = uint((sqrt(8.0 * float(e) + 1.0) - 1.0) * 0.5);
            if (t * (t + 1u) / 2u > e) --t;  // the rounding of sqrt, either way
            if ((t + 1u) * (t + 2u) / 2u <= e) ++t;
            uint s = e - t * (t + 1u) / 2u;
            float qk = 0.0, kk = 0.0;
            for (uint i = 0u; i < DK; ++i) {
                float kv = ks[s * DKP + i];
                qk = fma(qw[t * DKP + i], kv, qk);
                kk = fma(ks[t * DKP + i], kv, kk);
            }
            float g = 1.0;
            for (uint u = s + 1u; u <= t; ++u) g *= ga[u];
            tri[t * CP + s] = g * qk;
            if (s < t) tri[s * CP + t] = bt[t] * g * kk;
        }
        [[unroll]] for (uint u = 0u; u < NO; ++u) {
            uint e = tid + u * WG, t = e / COLS, jl = e - t * COLS;
            float acc = 0.0;
            if (t < m) {
                for (uint i = 0u; i < DK; ++i) acc = fma(qw[t * DKP + i], ss[i * COLS + jl], acc);
                acc *= gc[t];
            }
            y[u] = acc;
        }
        barrier();  // q is read: its rows become the right-hand side of W
        // From here on k is only needed in the state update: scale its rows by Γ[last][t] now.
        for (uint e = tid; e < C * DK; e += WG) {
            uint t = e / DK, i = e - t * DK;
            float kv = ks[t * DKP + i];
            qw[t * DKP + i] = t < m ? bt[t] * gc[t] * kv : 0.0;
            ks[t * DKP + i] = gl[t] * kv;
        }
        barrier();

        // (I + A) [W | U] = [diag(β Γ) K | diag(β) V], a row at a time; the columns in parallel.
        for (uint t = 1u; t < m; ++t) {
            for (uint c = tid; c < DK + COLS; c += WG) {
                float acc = 0.0;
                if (c < DK) {
                    for (uint s = 0u; s < t; ++s)
                        acc = fma(tri[s * CP + t], qw[s * DKP + c], acc);
                    qw[t * DKP + c] -= acc;
                } else {
                    uint jl = c - DK;
                    for (uint s = 0u; s < t; ++s)
                        acc = fma(tri[s * CP + t], ud[s * COLS + jl], acc);
                    ud[t * COLS + jl] -= acc;
                }
            }
            barrier();
        }

        // D = U - W S0, in place (a thread reads and writes only its own entries of ud).
        [[unroll]] for (uint u = 0u; u < NO; ++u) {
            uint e = tid + u * WG, t = e / COLS, jl = e - t * COLS;
            if (t < m) {
                float acc = ud[e];
                for (uint i = 0u; i < DK; ++i) acc = fma(-qw[t * DKP + i], ss[i * COLS + jl], acc);
                ud[e] = acc;
            }
        }
        barrier();

        // The outputs: inter-chunk part plus the masked, decayed Q Kᵀ times D.
        [[unroll]] for (uint u = 0u; u < NO; ++u) {
            uint e = tid + u * WG, t = e / COLS, jl = e - t * COLS;
            if (t < m && jl < ncols) {
                float o = y[u];
                for (uint s = 0u; s <= t; ++s) o = fma(tri[t * CP + s], ud[s * COLS + jl], o);
                act[p.y_off + (r0 + t) * p.y_row + h * p.d_v + c0 + jl] = o;
            }
        }
        // The state, once a chunk.
        const float glast = gc[m - 1u];
        for (uint e = tid; e < DK * COLS; e += WG) {
            uint i = e / COLS, jl = e - i * COLS;
            float acc = glast * ss[e];
            for (uint t = 0u; t < m; ++t) acc = fma(ks[t * DKP + i], ud[t * COLS + jl], acc);
            ss[e] = acc;
        }
    }
    barrier();
    for (uint e = tid; e < DK * COLS; e += WG) {
        uint i = e / COLS, jl = e - i * COLS;
        if (jl < ncols) S[sb + i * p.d_v + jl] = ss[e];
    }
}
