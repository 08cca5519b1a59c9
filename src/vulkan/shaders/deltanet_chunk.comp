// The delta rule of a Gated DeltaNet layer over a window of n rows (prefill) in its chunked (WY)
// form, after deltanet_wy.comp wrote each chunk's factors W, U and P (see there for the math):
// workgroup (value head h, slice of COLS value columns) walks the chunks in order with the
// state slice S [d_k][COLS] on chip from the first row of the window to the last, and per
// chunk of C rows forms
//   D = U - W S,  O = diag(Γ_t) Q S + P D,  S = Γ_last S + Kᵀ diag(Γ[last][t]) D
// (Γ_t: decay from the chunk's start through row t, Γ[last][t]: from row t to its last row).
// The raw o goes to the output rows; gated_norm applies the gated RMSNorm afterwards.
//
// Why this shape: the token scan's time is n × the latency of one row's dependent chain. Here
// the sequential part is n / C steps of three dense products of C × d_k × COLS, which every
// thread shares: a thread's outputs are one value column of NO chunk rows (tr, tr + RG, ..), so
// each quad of state rows it reads serves NO rows, and its share of the state update is column
// jl of NW row quads, kept in registers between chunks. The chunk's W, Q, P and K rows are
// staged in shared memory by the whole workgroup (each thread a few quads, all in flight at
// once), loaded into registers while the chunk before computes: read straight from device
// memory inside the products, every quad was a cache miss of its own in a dependent chain
// (9B shape, 512 rows: 230 us against 208 for the token scan). Four barriers a chunk.
#version 450
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint DK = 128;   // a multiple of 4
layout(constant_id = 2) const uint C = 32;     // rows a chunk (deltanet_wy.comp's)
layout(constant_id = 3) const uint COLS = 32;  // value columns a workgroup, a power of two <= WG
// 1: every quad this kernel reads (q, k, W rows) starts 16-byte aligned in binding 2.
layout(constant_id = 4) const uint VEC = 0;
const uint DV4 = DK / 4u;
const uint RG = WG / COLS;                     // row groups: threads sharing a value column
const uint NO = (C + RG - 1u) / RG;            // chunk rows of a thread's outputs
const uint NW = (DV4 + RG - 1u) / RG;          // state row quads a thread updates

// act is bound twice: binding 0 for the output rows, binding 2 (read-only, as floats and as
// quads) for everything read, none of which this dispatch writes, so those loads may take the
// device's read-only cache path.
layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) buffer State { float S[]; };  // [H_v][d_k][d_v]
layout(std430, binding = 2) readonly buffer In { float ain[]; };
layout(std430, binding = 2) readonly buffer In4 { vec4 ain4[]; };

layout(push_constant) uniform Push {
    uint n_k_heads, n_v_heads, d_v, n;
    uint qkv_off, qkv_row;      // act: normed conv output rows (q heads, k heads, v heads)
    uint b_off, a_off, ba_row;  // act: beta and decay rows
    uint y_off, y_row;          // act: output rows [n][H_v * d_v]
    uint wy_off;                // act: deltanet_wy.comp's scratch rows
} p;

const uint DKV = DV4 + 1u;  // padded row stride of staged rows in quads (threads on different
                            // rows read different banks)
const uint CP = C + 1u;     // padded row stride of P
shared float ss[DK * COLS];  // the state slice S[i][column]
shared vec4 wk[C * DKV];     // the chunk's W rows, then its K rows
shared vec4 qq[C * DKV];     // the chunk's Q rows
shared float pp[C * CP];     // the chunk's P (0 past the diagonal)
shared float dd[C * COLS];   // D of the chunk
shared float gc[C];          // Γ_t (from deltanet_wy.comp)
shared float gl[C];          // Γ[last][t]

// A chunk in flight: each thread's share of its rows, loaded into registers by fetch_*() while
// the chunk before computes, stored to shared memory by put_*().
const uint NQ = (C * DV4 + WG - 1u) / WG;
const uint NP = (C * C + WG - 1u) / WG;
const uint NG = (C + WG - 1u) / WG;
vec4 fw[NQ], fq[NQ], fk[NQ];
float fp[NP], fgc[NG], fgl[NG];

// Four consecutive floats of act (at a multiple of 4 when VEC is set).
vec4 quad(uint at) {
    if (VEC != 0u) return ain4[at >> 2];
    return vec4(ain[at], ain[at + 1u], ain[at + 2u], ain[at + 3u]);
}

// State rows i .. i+3 of column jl into the shared slice.
void put_state(uint i, uint jl, vec4 v) {
    ss[i * COLS + jl] = v.x;
    ss[(i + 1u) * COLS + jl] = v.y;
    ss[(i + 2u) * COLS + jl] = v.z;
    ss[(i + 3u) * COLS + jl] = v.w;
}

// Rows past the window are loaded from its last row (never out of range) and never used.
void fetch_wqp(uint h, uint qb, uint w_base, uint p_base, uint g_base, uint r0, uint m) {
    const uint tid = gl_LocalInvocationID.x;
    [[unroll]] for (uint u = 0u; u < NQ; ++u) {
        uint e = min(tid + u * WG, C * DV4 - 1u), t = min(e / DV4, m - 1u), v = e % DV4;
        fw[u] = quad(w_base + ((r0 + t) * p.n_v_heads + h) * DK + 4u * v);
        fq[u] = quad(qb + (r0 + t) * p.qkv_row + 4u * v);
    }
    [[unroll]] for (uint u = 0u; u < NP; ++u) {
        uint e = min(tid + u * WG, C * C - 1u), t = e / C, s = e % C;
        // P past the diagonal was never written: the select drops whatever it holds.
        float v = ain[p_base + ((r0 + min(t, m - 1u)) * p.n_v_heads + h) * C + s];
        fp[u] = s <= t && t < m ? v : 0.0;
    }
    [[unroll]] for (uint u = 0u; u < NG; ++u) {
        uint t = min(tid + u * WG, m - 1u);
        fgc[u] = ain[g_base + ((r0 + t) * p.n_v_heads + h) * 2u];
        fgl[u] = ain[g_base + ((r0 + t) * p.n_v_heads + h) * 2u + 1u];
    }
}

void fetch_k(uint kb, uint r0, uint m) {
    const uint tid = gl_LocalInvocationID.x;
    [[unroll]] for (uint u = 0u; u < NQ; ++u) {
        uint e = min(tid + u * WG, C * DV4 - 1u), t = min(e / DV4, m - 1u), v = e % DV4;
        fk[u] = quad(kb + (r0 + t) * p.qkv_row + 4u * v);
    }
}

void put_wqp() {
    const uint tid = gl_LocalInvocationID.x;
    [[unroll]] for (uint u = 0u; u < NQ; ++u) {
        uint e = tid + u * WG, t = e / DV4, v = e % DV4;
        if (e < C * DV4) {
            wk[t * DKV + v] = fw[u];
            qq[t * DKV + v] = fq[u];
        }
    }
    [[unroll]] for (uint u = 0u; u < NP; ++u) {
        uint e = tid + u * WG;
        if (e < C * C) pp[(e / C) * CP + e % C] = fp[u];
    }
    [[unroll]] for (uint u = 0u; u < NG; ++u) {
        uint t = tid + u * WG;
        if (t < C) {
            gc[t] = fgc[u];
            gl[t] = fgl[u];
        }
    }
}

void put_k() {
    const uint tid = gl_LocalInvocationID.x;
    [[unroll]] for (uint u = 0u; u < NQ; ++u) {
        uint e = tid + u * WG;
        if (e < C * DV4) wk[(e / DV4) * DKV + e % DV4] = fk[u];
    }
}

void main() {
    const uint h = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
    const uint c0 = gl_WorkGroupID.y * COLS, ncols = min(COLS, p.d_v - c0);
    const uint hk = h % p.n_k_heads;
    const uint sb = h * DK * p.d_v + c0;
    const uint jl = tid % COLS, tr = tid / COLS;
    const uint qb = p.qkv_off + hk * DK, kb = p.qkv_off + (p.n_k_heads + hk) * DK;
    const uint w_base = p.wy_off, u_base = w_base + p.n * p.n_v_heads * DK;
    const uint p_base = u_base + p.n * p.n_v_heads * p.d_v;
    const uint g_base = p_base + p.n * p.n_v_heads * C;

    // The thread's state quads (column jl, rows 4w' .. 4w'+3 for w' = tr + w RG), also in ss.
    vec4 sv[NW];
    [[unroll]] for (uint w = 0u; w < NW; ++w) {
        uint i = 4u * (tr + w * RG);
        sv[w] = vec4(0.0);
        if (i < DK && jl < ncols)
            sv[w] = vec4(S[sb + i * p.d_v + jl], S[sb + (i + 1u) * p.d_v + jl],
                         S[sb + (i + 2u) * p.d_v + jl], S[sb + (i + 3u) * p.d_v + jl]);
        if (i < DK) put_state(i, jl, sv[w]);
    }
    fetch_wqp(h, qb, w_base, p_base, g_base, 0u, min(C, p.n));
    fetch_k(kb, 0u, min(C, p.n));

    for (uint r0 = 0u; r0 < p.n; r0 += C) {
        const uint m = min(C, p.n - r0), r1 = r0 + C, m1 = r1 < p.n ? min(C, p.n - r1) : 0u;
        put_wqp();  // the chunk before ended at a barrier after its last read of these
        barrier();
        if (m1 > 0u) fetch_wqp(h, qb, w_base, p_base, g_base, r1, m1);

        // W S and Q S for the thread's rows, four independent chains a row (the quad lanes).
        vec4 aw[NO], aq[NO];
        [[unroll]] for (uint u = 0u; u < NO; ++u) aw[u] = aq[u] = vec4(0.0);
        [[unroll]] for (uint v = 0u; v < DV4; ++v) {
            vec4 s4 = vec4(ss[(4u * v) * COLS + jl], ss[(4u * v + 1u) * COLS + jl],
                           ss[(4u * v + 2u) * COLS + jl], ss[(4u * v + 3u) * COLS + jl]);
            [[unroll]] for (uint u = 0u; u < NO; ++u) {
                uint t = min(tr + u * RG, C - 1u);
                aw[u] = fma(wk[t * DKV + v], s4, aw[u]);
                aq[u] = fma(qq[t * DKV + v], s4, aq[u]);
            }
        }
        float qs[NO];
        [[unroll]] for (uint u = 0u; u < NO; ++u) {
            uint t = tr + u * RG;
            qs[u] = dot(aq[u], vec4(1.0));
            if (t < C) {
                float d = 0.0;
                if (t < m && jl < ncols)
                    d = ain[u_base + ((r0 + t) * p.n_v_heads + h) * p.d_v + c0 + jl] -
                        dot(aw[u], vec4(1.0));
                dd[t * COLS + jl] = d;
            }
        }
        barrier();  // D ready; every read of the old state and of W done
        put_k();
        barrier();
        if (m1 > 0u) fetch_k(kb, r1, m1);

        // The outputs: Γ_t q_t S plus the intra-chunk part P D.
        [[unroll]] for (uint u = 0u; u < NO; ++u) {
            uint t = tr + u * RG;
            if (t < m && jl < ncols) {
                float o = gc[t] * qs[u];
                [[unroll]] for (uint s = 0u; s < C; ++s)
                    o = fma(pp[t * CP + s], dd[s * COLS + jl], o);
                act[p.y_off + (r0 + t) * p.y_row + h * p.d_v + c0 + jl] = o;
            }
        }
        // The state: S = Γ_last S + Σ_t (Γ[last][t] d_t) k_tᵀ, each d_t read once.
        const float glast = gc[m - 1u];
        [[unroll]] for (uint w = 0u; w < NW; ++w) sv[w] *= glast;
        [[unroll]] for (uint t = 0u; t < C; ++t) {
            float dt = t < m ? gl[t] * dd[t * COLS + jl] : 0.0;
            [[unroll]] for (uint w = 0u; w < NW; ++w)
                if (tr + w * RG < DV4) sv[w] = fma(vec4(dt), wk[t * DKV + tr + w * RG], sv[w]);
        }
        [[unroll]] for (uint w = 0u; w < NW; ++w) {
            uint i = 4u * (tr + w * RG);
            if (i < DK) put_state(i, jl, sv[w]);
        }
        barrier();
    }
    [[unroll]] for (uint w = 0u; w < NW; ++w) {
        uint i = 4u * (tr + w * RG);
        if (i < DK && jl < ncols) {
            S[sb + i * p.d_v + jl] = sv[w].x;
            S[sb + (i + 1u) * p.d_v + jl] = sv[w].y;
            S[sb + (i + 2u) * p.d_v + jl] = sv[w].z;
            S[sb + (i + 3u) * p.d_v + jl] = sv[w].w;
        }
    }
}
