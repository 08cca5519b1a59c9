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
// picks COLS (32, 16 or 8) and then C (64, 32 or 16) from the shared memory the device reports.
// Every value-column slice redoes A and W, so wide slices and short chunks keep that small.
// Shared-memory reads are what bound it, so: q, k and W rows are vec4 quads (one 16-byte read
// for four FMAs of a dot), padded by one quad so that the threads of the A phase, each on its
// own row s, read different banks; a thread's outputs are one value column of NO chunk rows,
// so each quad of state rows it reads serves NO rows, and the state update keeps the thread's
// row quads in registers so that each d_t is read once.
//
// Arithmetic per chunk and workgroup (FMAs): Γ⊙QKᵀ and A C(C+1)/2 × 2 DK, the solve
// C(C-1)/2 × (DK + COLS), Q S0, W S0 and the state update C × DK × COLS each, the intra-chunk
// output C(C+1)/2 × COLS. Expected on the H200 (d_k = d_v = 128: COLS 32, C 16, 36.7 KB of
// shared memory, H_v × 4 workgroups of 128 threads): 255k FMAs a chunk and workgroup, 63.7k
// FMAs a row and value head (127 kFLOP; the token scan does ~180 kFLOP, the recurrence itself
// 3 × 128 × 128 FMAs = 98 kFLOP; A and W redone per slice are 21% of it); about 5.1k
// shared-memory wavefronts a chunk and workgroup, so ~80 us for a 512-row window of the 9B
// (H_v 32) if shared reads bound it, against 209 us measured for the token scan. State traffic:
// device memory the same as the token scan (S read and written once a window, 128 KiB a
// head); on chip the slice is read three times and written once a chunk (16 KiB a row and
// head in shared memory, where the token scan keeps it in registers).
#version 450
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;
layout(constant_id = 1) const uint DK = 128;   // a multiple of 4
layout(constant_id = 2) const uint C = 16;     // rows a chunk
layout(constant_id = 3) const uint COLS = 32;  // value columns a workgroup, a power of two <= WG
const uint DV4 = DK / 4u;                      // q/k/W row length in vec4
const uint DKV = DV4 + 1u;                     // its padded row stride (see the header)
const uint CP = C + 1u;                        // padded row stride of the C × C matrix
const uint RG = WG / COLS;                     // row groups: threads sharing a value column
const uint NO = (C + RG - 1u) / RG;            // chunk rows of a thread's outputs
const uint NW = (DV4 + RG - 1u) / RG;          // state row quads a thread updates

layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) buffer State { float S[]; };  // [H_v][d_k][d_v]

layout(push_constant) uniform Push {
    uint n_k_heads, n_v_heads, d_v, n;
    uint qkv_off, qkv_row;      // act: normed conv output rows (q heads, k heads, v heads)
    uint b_off, a_off, ba_row;  // act: beta and decay rows
    uint y_off, y_row;          // act: output rows [n][H_v * d_v]
} p;

shared float ss[DK * COLS];  // the state slice S[i][column]
shared vec4 qw[C * DKV];     // the chunk's q rows, then the rows of W
shared vec4 ks[C * DKV];     // the chunk's k rows, later times Γ[last][t]
// Γ ⊙ QKᵀ on and below the diagonal at [t][s]; A strictly above it, transposed, at [s][t].
shared float tri[C * CP];
shared float ud[C * COLS];  // β v, then U after the solve, then D
shared float ga[C];         // decay a_t
shared float gc[C];         // Γ_t: decay from the chunk's start through row t
shared float gl[C];         // Γ[last][t]: decay from row t to the chunk's last row
shared float bt[C];         // beta

// A chunk in flight: each thread's share of the q, k, v, beta and decay of C rows, loaded into
// registers by fetch() while the previous chunk computes and stored to shared memory by put(),
// so that a chunk waits for one round trip to device memory at most, and usually none.
const uint PQ = (C * DV4 + WG - 1u) / WG;
const uint PV = (C * COLS + WG - 1u) / WG;
const uint PB = (C + WG - 1u) / WG;
vec4 pq[PQ], pk[PQ];
float pv[PV], pa[PB], pb[PB];

void fetch(uint tid, uint h, uint qb, uint kb, uint vb, uint ncols, uint r0, uint m) {
    [[unroll]] for (uint u = 0u; u < PQ; ++u) {
        uint e = tid + u * WG, t = e / DV4, v = e - t * DV4, at = (r0 + t) * p.qkv_row + 4u * v;
        bool ok = t < m;
        pq[u] = ok ? vec4(act[qb + at], act[qb + at + 1u], act[qb + at + 2u], act[qb + at + 3u])
                   : vec4(0.0);
        pk[u] = ok ? vec4(act[kb + at], act[kb + at + 1u], act[kb + at + 2u], act[kb + at + 3u])
                   : vec4(0.0);
    }
    [[unroll]] for (uint u = 0u; u < PV; ++u) {
        uint e = tid + u * WG, t = e / COLS, c = e - t * COLS;
        pv[u] = t < m && c < ncols ? act[vb + (r0 + t) * p.qkv_row + c] : 0.0;
    }
    [[unroll]] for (uint u = 0u; u < PB; ++u) {
        uint t = tid + u * WG;
        pa[u] = t < m ? act[p.a_off + (r0 + t) * p.ba_row + h] : 1.0;
        pb[u] = t < m ? act[p.b_off + (r0 + t) * p.ba_row + h] : 0.0;
    }
}

void put(uint tid) {
    [[unroll]] for (uint u = 0u; u < PQ; ++u) {
        uint e = tid + u * WG, t = e / DV4, v = e - t * DV4;
        if (t < C) {
            qw[t * DKV + v] = pq[u];
            ks[t * DKV + v] = pk[u];
        }
    }
    [[unroll]] for (uint u = 0u; u < PV; ++u) {
        uint e = tid + u * WG;
        if (e < C * COLS) ud[e] = pv[u];
    }
    [[unroll]] for (uint u = 0u; u < PB; ++u) {
        uint t = tid + u * WG;
        if (t < C) {
            ga[t] = pa[u];
            bt[t] = pb[u];
        }
    }
}

void main() {
    const uint h = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
    const uint c0 = gl_WorkGroupID.y * COLS, ncols = min(COLS, p.d_v - c0);
    const uint hk = h % p.n_k_heads;
    const uint sb = h * DK * p.d_v + c0;
    // A thread's outputs are column jl of chunk rows tr, tr + RG, ..; its share of the state
    // update is column jl of the row quads tr, tr + RG, ..
    const uint jl = tid % COLS, tr = tid / COLS;
    for (uint e = tid; e < DK * COLS; e += WG) {
        uint i = e / COLS, c = e - i * COLS;
        ss[e] = c < ncols ? S[sb + i * p.d_v + c] : 0.0;
    }
    const uint qb = p.qkv_off + hk * DK, kb = p.qkv_off + (p.n_k_heads + hk) * DK;
    const uint vb = p.qkv_off + 2u * p.n_k_heads * DK + h * p.d_v + c0;
    float y[NO];  // the inter-chunk part Γ_t q_t S0 of this thread's outputs

    fetch(tid, h, qb, kb, vb, ncols, 0u, min(C, p.n));
    for (uint r0 = 0u; r0 < p.n; r0 += C) {
        const uint m = min(C, p.n - r0);
        barrier();  // the previous chunk is done with every shared array
        put(tid);
        barrier();
        // The next chunk's loads fly while this one computes.
        if (r0 + C < p.n) fetch(tid, h, qb, kb, vb, ncols, r0 + C, min(C, p.n - r0 - C));
        for (uint e = tid; e < C * COLS; e += WG) ud[e] *= bt[e / COLS];
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
            vec4 qk = vec4(0.0), kk = vec4(0.0);
            for (uint v = 0u; v < DV4; ++v) {
                vec4 kv = ks[s * DKV + v];
                qk = fma(qw[t * DKV + v], kv, qk);
                kk = fma(ks[t * DKV + v], kv, kk);
            }
            float g = 1.0;
            for (uint u = s + 1u; u <= t; ++u) g *= ga[u];
            tri[t * CP + s] = g * dot(qk, vec4(1.0));
            if (s < t) tri[s * CP + t] = bt[t] * g * dot(kk, vec4(1.0));
        }
        // Γ_t q_t S0 for this thread's outputs: a quad of state rows read once serves NO rows.
        // Sums kept per quad lane (four independent chains), added up at the end.
        vec4 acc[NO];
        [[unroll]] for (uint u = 0u; u < NO; ++u) acc[u] = vec4(0.0);
        for (uint v = 0u; v < DV4; ++v) {
            vec4 sv = vec4(ss[(4u * v) * COLS + jl], ss[(4u * v + 1u) * COLS + jl],
                           ss[(4u * v + 2u) * COLS + jl], ss[(4u * v + 3u) * COLS + jl]);
            [[unroll]] for (uint u = 0u; u < NO; ++u) {
                uint t = tr + u * RG;
                if (t < m) acc[u] = fma(qw[t * DKV + v], sv, acc[u]);
            }
        }
        [[unroll]] for (uint u = 0u; u < NO; ++u) {
            uint t = tr + u * RG;
            y[u] = t < m ? gc[t] * dot(acc[u], vec4(1.0)) : 0.0;
        }
        barrier();  // q is read: its rows become the right-hand side of W
        // From here on k is only needed in the state update: scale its rows by Γ[last][t] now.
        for (uint e = tid; e < C * DV4; e += WG) {
            uint t = e / DV4, v = e - t * DV4;
            vec4 kv = ks[t * DKV + v];
            qw[t * DKV + v] = t < m ? bt[t] * gc[t] * kv : vec4(0.0);
            ks[t * DKV + v] = gl[t] * kv;
        }
        barrier();

        // (I + A) [W | U] = [diag(β Γ) K | diag(β) V], a row at a time; the columns (quads of W,
        // single columns of U) in parallel.
        for (uint t = 1u; t < m; ++t) {
            for (uint c = tid; c < DV4 + COLS; c += WG) {
                if (c < DV4) {
                    vec4 acc = vec4(0.0);
                    for (uint s = 0u; s < t; ++s) acc += tri[s * CP + t] * qw[s * DKV + c];
                    qw[t * DKV + c] -= acc;
                } else {
                    uint cu = c - DV4;
                    float acc = 0.0;
                    for (uint s = 0u; s < t; ++s)
                        acc = fma(tri[s * CP + t], ud[s * COLS + cu], acc);
                    ud[t * COLS + cu] -= acc;
                }
            }
            barrier();
        }

        // D = U - W S0 (a thread reads and writes only its own entries of ud).
        [[unroll]] for (uint u = 0u; u < NO; ++u) acc[u] = vec4(0.0);
        for (uint v = 0u; v < DV4; ++v) {
            vec4 sv = vec4(ss[(4u * v) * COLS + jl], ss[(4u * v + 1u) * COLS + jl],
                           ss[(4u * v + 2u) * COLS + jl], ss[(4u * v + 3u) * COLS + jl]);
            [[unroll]] for (uint u = 0u; u < NO; ++u) {
                uint t = tr + u * RG;
                if (t < m) acc[u] = fma(qw[t * DKV + v], sv, acc[u]);
            }
        }
        [[unroll]] for (uint u = 0u; u < NO; ++u) {
            uint t = tr + u * RG;
            if (t < m) ud[t * COLS + jl] -= dot(acc[u], vec4(1.0));
        }
        barrier();

        // The outputs: inter-chunk part plus the masked, decayed Q Kᵀ times D.
        [[unroll]] for (uint u = 0u; u < NO; ++u) {
            uint t = tr + u * RG;
            if (t < m && jl < ncols) {
                float o = y[u];
                for (uint s = 0u; s <= t; ++s) o = fma(tri[t * CP + s], ud[s * COLS + jl], o);
                act[p.y_off + (r0 + t) * p.y_row + h * p.d_v + c0 + jl] = o;
            }
        }
        // The state, once a chunk: S = Γ_last S + (Γ[last][t] k_t)ᵀ D, the thread's row quads
        // in registers so that each d_t is read once.
        const float glast = gc[m - 1u];
        vec4 sv[NW];
        [[unroll]] for (uint w = 0u; w < NW; ++w) {
            uint i = 4u * (tr + w * RG);
            sv[w] = i < DK ? glast * vec4(ss[i * COLS + jl], ss[(i + 1u) * COLS + jl],
                                          ss[(i + 2u) * COLS + jl], ss[(i + 3u) * COLS + jl])
                           : vec4(0.0);
        }
        for (uint t = 0u; t < m; ++t) {
            float dt = ud[t * COLS + jl];
            [[unroll]] for (uint w = 0u; w < NW; ++w)
                if (tr + w * RG < DV4) sv[w] += dt * ks[t * DKV + tr + w * RG];
        }
        [[unroll]] for (uint w = 0u; w < NW; ++w) {
            uint i = 4u * (tr + w * RG);
            if (i < DK) {
                ss[i * COLS + jl] = sv[w].x;
                ss[(i + 1u) * COLS + jl] = sv[w].y;
                ss[(i + 2u) * COLS + jl] = sv[w].z;
                ss[(i + 3u) * COLS + jl] = sv[w].w;
            }
        }
    }
    barrier();
    for (uint e = tid; e < DK * COLS; e += WG) {
        uint i = e / COLS, c = e - i * COLS;
        if (c < ncols) S[sb + i * p.d_v + c] = ss[e];
    }
}
