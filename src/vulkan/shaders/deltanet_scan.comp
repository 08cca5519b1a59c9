// The delta rule of a Gated DeltaNet layer over a window of n rows (prefill), after deltanet_conv
// and deltanet_gates: workgroup (value head h, slice of COLS value columns), per row r
//   S = decay·S + k dᵀ,  d = beta (v - decay Sᵀk),  o = Sᵀq = decay (S_oldᵀq) + d (k·q)
// with q, k already L2-normed (q scaled). Value head h reads q/k head h mod H_k (GGUF order). The
// raw o goes to the output rows; gated_norm applies the gated RMSNorm afterwards.
//
// Why this shape: the rows are inherently sequential, so the time is n × the latency of one
// row, and the old kernel's row was two serial d_k-long FMA chains plus two workgroup barriers
// and dependent global loads. Here
//   - SPLIT threads share a value column, each keeping d_k/SPLIT rows of the state column in
//     registers (rows i·SPLIT + part, so the SPLIT threads read neighbouring shared words); the
//     partial Sᵀk, Sᵀq and k·q are summed over the SPLIT threads with subgroup operations
//     (clustered adds, or xor shuffles), never a barrier. The clusters are SPLIT neighbouring
//     subgroup lanes; the launcher keeps SPLIT <= the smallest subgroup size the device reports
//     and the column/part of a thread come from its subgroup lane, so no subgroup size is
//     assumed. Without subgroup operations the module is built with SPLIT = 1 (a thread holds
//     the whole column; no reduction).
//   - o is formed from S_old (decay·Sᵀq + d·k·q), so Sᵀk, Sᵀq and k·q are sums of one pass
//     instead of two passes in a row. Rows go in pairs (a, b): with S the state before a,
//     one pass forms Sᵀk_a, Sᵀq_a, Sᵀk_b, Sᵀq_b and k_a·q_a, k_a·k_b, k_a·q_b, k_b·q_b, one
//     reduction sums all eight, and the rest is scalar:
//       Sᵀk_b after a = g_a Sᵀk_b + d_a (k_a·k_b),  Sᵀq_b after a = g_a Sᵀq_b + d_a (k_a·q_b)
//     so the serial path (chain, shuffles, d) is paid once per two rows.
//   - q, k, v, beta and decay of CHUNK rows are staged into shared memory by the whole
//     workgroup at once (coalesced, all loads in flight together): two barriers per CHUNK rows
//     instead of two per row, and the row loop reads only shared memory and registers.
//
// Expected cost on the H200 (d_k = d_v = 128, SPLIT 8, 16 state rows a thread, COLS 16, so
// H_v × 8 workgroups of 128 threads): per pair of rows 64 broadcast shared loads, eight 16-deep
// FMA chains side by side, three xor stages of eight shuffles, the scalar tail and 16 updates:
// about 250-300 cycles of issue and latency, 0.15 us a row. Measured with the speed report in
// tests/vulkan/deltanet_window_test.cpp on a 512-row window (clocks at 1980 MHz): 157 us for
// H_v 16 (Qwen3.5 0.8B), 209 us for H_v 32 (9B), about 0.3-0.4 us a row, against ~1.9 ms (3.7
// us a row) before; the clustered-add module takes 277 / 321 us and the plain one 935 us.
// Staging chunks of 16 or 32 rows measured the same, and so did 16 threads a column; two
// columns a thread (half the shared loads) took 197-239 us, 4 threads a column 203 us: what
// remains is the row's own chain, not the loads or the staging.
#version 450
#extension GL_EXT_control_flow_attributes : require
#if defined(SCAN_CLUSTERED)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_clustered : require
#elif defined(SCAN_SHUFFLE)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;  // COLS × SPLIT
layout(constant_id = 1) const uint DK = 128;
layout(constant_id = 2) const uint CHUNK = 32;  // rows staged in shared memory at once
#if defined(SCAN_CLUSTERED) || defined(SCAN_SHUFFLE)
layout(constant_id = 3) const uint SPLIT = 8;  // threads per value column, <= the subgroup size
#else
const uint SPLIT = 1;
#endif
const uint COLS = WG / SPLIT;  // value columns of the workgroup
const uint SUB = DK / SPLIT;   // state rows a thread holds

layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) buffer State { float S[]; };  // [H_v][d_k][d_v]

layout(push_constant) uniform Push {
    uint n_k_heads, n_v_heads, d_v, n;
    uint qkv_off, qkv_row;      // act: normed conv output rows (q heads, k heads, v heads)
    uint b_off, a_off, ba_row;  // act: beta and decay rows
    uint y_off, y_row;          // act: output rows [n][H_v * d_v]
} p;

shared float qs[CHUNK * DK];
shared float ks[CHUNK * DK];
shared float vs[CHUNK * COLS];
shared float bs[CHUNK];
shared float gs[CHUNK];

// A chunk in flight: each thread's share of the q, k, v, beta and decay of CHUNK rows, loaded
// into registers by fetch() before the previous chunk computes and stored to shared by put().
const uint PQK = (CHUNK * DK + WG - 1u) / WG;
const uint PV = (CHUNK * COLS + WG - 1u) / WG;
const uint PB = (CHUNK + WG - 1u) / WG;
float pq[PQK], pk[PQK], pv[PV], pb[PB], pg[PB];

void fetch(uint tid, uint qb, uint kb, uint vb, uint h, uint r0, uint m) {
    [[unroll]] for (uint u = 0; u < PQK; ++u) {
        uint e = tid + u * WG, rr = e / DK, i = e - rr * DK, row = (r0 + rr) * p.qkv_row;
        bool ok = e < m * DK;
        pq[u] = ok ? act[qb + row + i] : 0.0;
        pk[u] = ok ? act[kb + row + i] : 0.0;
    }
    [[unroll]] for (uint u = 0; u < PV; ++u) {
        uint e = tid + u * WG, rr = e / COLS;
        pv[u] = e < m * COLS ? act[vb + (r0 + rr) * p.qkv_row + e - rr * COLS] : 0.0;
    }
    [[unroll]] for (uint u = 0; u < PB; ++u) {
        uint e = tid + u * WG;
        pb[u] = e < m ? act[p.b_off + (r0 + e) * p.ba_row + h] : 0.0;
        pg[u] = e < m ? act[p.a_off + (r0 + e) * p.ba_row + h] : 0.0;
    }
}

void put(uint tid, uint m) {
    [[unroll]] for (uint u = 0; u < PQK; ++u) {
        uint e = tid + u * WG;
        if (e < m * DK) {
            qs[e] = pq[u];
            ks[e] = pk[u];
        }
    }
    [[unroll]] for (uint u = 0; u < PV; ++u) {
        uint e = tid + u * WG;
        if (e < m * COLS) vs[e] = pv[u];
    }
    [[unroll]] for (uint u = 0; u < PB; ++u) {
        uint e = tid + u * WG;
        if (e < m) {
            bs[e] = pb[u];
            gs[e] = pg[u];
        }
    }
}

// Sum over the SPLIT threads of a column (neighbouring lanes of one subgroup).
float column_sum(float x) {
#if defined(SCAN_CLUSTERED)
    // The cluster size must be a constant of the module: one branch survives specialization.
    if (SPLIT == 2u) return subgroupClusteredAdd(x, 2);
    if (SPLIT == 4u) return subgroupClusteredAdd(x, 4);
    if (SPLIT == 8u) return subgroupClusteredAdd(x, 8);
    if (SPLIT == 16u) return subgroupClusteredAdd(x, 16);
    return x;
#elif defined(SCAN_SHUFFLE)
    [[unroll]] for (uint m = 1u; m < SPLIT; m <<= 1) x += subgroupShuffleXor(x, m);
    return x;
#else
    return x;
#endif
}

void main() {
    uint h = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
#if defined(SCAN_CLUSTERED) || defined(SCAN_SHUFFLE)
    uint lane = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#else
    uint lane = tid;
#endif
    uint part = lane % SPLIT, col = lane / SPLIT;
    uint c0 = gl_WorkGroupID.y * COLS, j = c0 + col;
    uint hk = h % p.n_k_heads;
    uint sb = h * DK * p.d_v + j;
    float s[SUB];
    [[unroll]] for (uint i = 0; i < SUB; ++i) s[i] = S[sb + (i * SPLIT + part) * p.d_v];

    uint qb = p.qkv_off + hk * DK, kb = p.qkv_off + (p.n_k_heads + hk) * DK;
    uint vb = p.qkv_off + 2u * p.n_k_heads * DK + h * p.d_v + c0;
    fetch(tid, qb, kb, vb, h, 0u, min(CHUNK, p.n));
    for (uint r0 = 0; r0 < p.n; r0 += CHUNK) {
        uint m = min(CHUNK, p.n - r0);
        barrier();  // the previous chunk's rows are read
        put(tid, m);
        barrier();
        // The next chunk's loads fly while this one computes.
        if (r0 + CHUNK < p.n) fetch(tid, qb, kb, vb, h, r0 + CHUNK, min(CHUNK, p.n - r0 - CHUNK));
        uint rr = 0u;
        // Rows in pairs: one pass and one reduction serve two rows (see the header). Not in
        // the module without subgroups: its 8 sums over a whole column cost more than they save.
        for (; SPLIT > 1u && rr + 1u < m; rr += 2u) {
            uint a0 = rr * DK + part, a1 = a0 + DK;
            float ska = 0.0, sqa = 0.0, skb = 0.0, sqb = 0.0;
            float kqa = 0.0, kkab = 0.0, kqab = 0.0, kqb = 0.0;
            [[unroll]] for (uint i = 0; i < SUB; ++i) {
                float k0 = ks[a0 + i * SPLIT], q0 = qs[a0 + i * SPLIT];
                float k1 = ks[a1 + i * SPLIT], q1 = qs[a1 + i * SPLIT];
                ska = fma(s[i], k0, ska);
                sqa = fma(s[i], q0, sqa);
                skb = fma(s[i], k1, skb);
                sqb = fma(s[i], q1, sqb);
                kqa = fma(k0, q0, kqa);
                kkab = fma(k0, k1, kkab);
                kqab = fma(k0, q1, kqab);
                kqb = fma(k1, q1, kqb);
            }
            ska = column_sum(ska);
            sqa = column_sum(sqa);
            skb = column_sum(skb);
            sqb = column_sum(sqb);
            kqa = column_sum(kqa);
            kkab = column_sum(kkab);
            kqab = column_sum(kqab);
            kqb = column_sum(kqb);
            float g0 = gs[rr], g1 = gs[rr + 1u];
            float d0 = bs[rr] * (vs[rr * COLS + col] - g0 * ska);
            float o0 = fma(g0, sqa, d0 * kqa);
            // Sᵀk and Sᵀq of the second row, with S after the first: g0 S + k0 d0ᵀ.
            float sk1 = fma(g0, skb, d0 * kkab), sq1 = fma(g0, sqb, d0 * kqab);
            float d1 = bs[rr + 1u] * (vs[(rr + 1u) * COLS + col] - g1 * sk1);
            float o1 = fma(g1, sq1, d1 * kqb);
            [[unroll]] for (uint i = 0; i < SUB; ++i)
                s[i] = fma(g1, fma(g0, s[i], ks[a0 + i * SPLIT] * d0), ks[a1 + i * SPLIT] * d1);
            if (part == 0u) {
                uint y = p.y_off + (r0 + rr) * p.y_row + h * p.d_v + j;
                act[y] = o0;
                act[y + p.y_row] = o1;
            }
        }
        for (; rr < m; ++rr) {  // single rows: the odd row out, or all without subgroups
            uint kq0 = rr * DK + part;
            // Two accumulators per sum halve the dependent chains.
            float sk0 = 0.0, sk1 = 0.0, sq0 = 0.0, sq1 = 0.0, kq0s = 0.0, kq1s = 0.0;
            [[unroll]] for (uint i = 0; i + 1u < SUB; i += 2u) {
                float k0 = ks[kq0 + i * SPLIT], q0 = qs[kq0 + i * SPLIT];
                float k1 = ks[kq0 + (i + 1u) * SPLIT], q1 = qs[kq0 + (i + 1u) * SPLIT];
                sk0 = fma(s[i], k0, sk0);
                sq0 = fma(s[i], q0, sq0);
                kq0s = fma(k0, q0, kq0s);
                sk1 = fma(s[i + 1u], k1, sk1);
                sq1 = fma(s[i + 1u], q1, sq1);
                kq1s = fma(k1, q1, kq1s);
            }
            if ((SUB & 1u) != 0u) {
                float k0 = ks[kq0 + (SUB - 1u) * SPLIT], q0 = qs[kq0 + (SUB - 1u) * SPLIT];
                sk0 = fma(s[SUB - 1u], k0, sk0);
                sq0 = fma(s[SUB - 1u], q0, sq0);
                kq0s = fma(k0, q0, kq0s);
            }
            float sk = column_sum(sk0 + sk1);
            float sq = column_sum(sq0 + sq1);
            float kq = column_sum(kq0s + kq1s);
            float g = gs[rr];
            float d = bs[rr] * (vs[rr * COLS + col] - g * sk);
            [[unroll]] for (uint i = 0; i < SUB; ++i) s[i] = fma(g, s[i], ks[kq0 + i * SPLIT] * d);
            if (part == 0u) act[p.y_off + (r0 + rr) * p.y_row + h * p.d_v + j] = fma(g, sq, d * kq);
        }
    }
    [[unroll]] for (uint i = 0; i < SUB; ++i) S[sb + (i * SPLIT + part) * p.d_v] = s[i];
}
