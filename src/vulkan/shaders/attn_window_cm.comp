// Causal attention for a window of query rows (prefill) on KHR cooperative matrices (subgroup
// scope): the flash attention of attn_window.comp with the two products of every key tile, the
// scores S = Q·Kᵀ and the weighted values P·V, on the device's matrix units. KHR matrices have no
// row reductions and their fragment layouts are opaque, so the online softmax runs on the
// workgroup's threads over S stored to shared memory, and everything that crosses between the
// two goes through shared memory with coopMatLoad / coopMatStore; no fragment element is ever
// indexed.
//
// A workgroup takes BR query vectors: BR / g window rows times g query heads that share one
// key/value head (g = p.group), vector q being row r0 + q / g, head h0 + q % g. The queries are
// scaled by 1/sqrt(head_dim), rounded to F16 and staged once. For every tile of BC keys the last
// of its rows can see:
//   stage K (F16, rows past the written keys as zero, so unwritten cache rows never reach a
//   product); S = Q·Kᵀ into shared memory (F32); stage V over K; the threads of each query
//   vector mask S (past its position: the causal mask, and past the written keys), take the new
//   running max M' = max(M, max S), the weights P = exp(S - M') rounded to F16 into shared
//   memory, the rescale α = exp(M - M') and L = α·L + sum P; O = α·O + P·V on the matrix units.
// α reaches O without indexing a fragment: it is written to an MS × NS block of shared memory
// whose every row holds its query vector's α, loaded as an accumulator of O's own type and
// multiplied element by element (both fragments hold the same elements in the same places,
// whatever the layout). Key 0 (split: the part's first key) is visible to every row, so M is
// finite from the first tile on (α = 0 there) and a fully masked later tile adds exp(-inf) = 0.
// The epilogue stores O to shared memory (in passes of OC columns where all of it does not
// fit), divides by L and, when gate_off is given, multiplies by sigmoid(gate); rows past the
// window are never written. Split over the keys (attn_window_split.glsl), each part stores its
// O, maxima and sums instead and the last part of a block merges them.
//
// The matrix shape MS × NS × KS is one the device lists for F16 × F16 → F32 (the launcher
// picks it, Kernels::attention_khr). Nothing assumes a subgroup size: S and O blocks are dealt
// out by gl_SubgroupID over gl_NumSubgroups; a subgroup keeps its O blocks in FPS accumulators,
// enough for the fewest subgroups the workgroup can have. Shared rows are whole 16-byte units
// (the alignment coopMatLoad and coopMatStore need) padded by one so rows start on different
// banks; every region is a slice of one uvec4 array, the output staging over the tiles.
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;  // threads: a multiple of the largest subgroup size
layout(constant_id = 1) const uint HD = 128;  // head_dim: a multiple of 8, NS and KS
layout(constant_id = 2) const uint BR = 32;   // query vectors a workgroup: a multiple of MS, divides WG
layout(constant_id = 3) const uint BC = 32;   // keys a tile: a multiple of NS and KS
layout(constant_id = 4) const uint MS = 16;   // the matrix shape: A is MS × KS, B KS × NS
layout(constant_id = 5) const uint NS = 16;   //   (NS and KS multiples of 8)
layout(constant_id = 6) const uint KS = 16;
layout(constant_id = 7) const uint FPS = 8;   // O blocks a subgroup holds at most
layout(constant_id = 8) const uint OC = 128;  // output columns an epilogue pass (divides HD, a multiple of NS)

layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) readonly buffer KCache { uvec4 kc[]; };  // 8 halves a unit
layout(std430, binding = 2) readonly buffer VCache { uvec4 vc[]; };
layout(std430, binding = 3) readonly buffer Tok { uint tok[]; };
layout(std430, binding = 4) coherent buffer Split { uint split_u[]; };
layout(std430, binding = 5) coherent buffer SplitF { float split_f[]; };
#include "kv_pages.glsl"

layout(push_constant) uniform Push {
    uint n_head, n_kv, n_rows;
    uint group;  // query heads a workgroup (divides BR and n_head / n_kv)
    uint q_off;  // act: prepared queries [n][n_head][HD]
    uint o_off, o_row;
    uint gate_off, gate_stride, gate_row;
    float scale;  // 1/sqrt(head_dim)
    uint splits;  // parts of the keys (grid z; attn_window_split.glsl)
} p;

const float NEG_INF = -1.0 / 0.0;

// Shared regions in 16-byte units: queries and the key or value tile (F16, [vector or key][HD]),
// scores (F32, [vector][BC]), weights (F16, [vector][BC]), the α block (F32, [vector][NS]); the
// output staging (F32, [vector][OC]) reuses them after the last tile. Kernels::attention_khr
// computes the same sizes.
const uint LDQ = HD / 8u + 1u;
const uint LDS = BC / 4u + 1u;
const uint LDP = BC / 8u + 1u;
const uint LDA = NS / 4u;
const uint LDO = OC / 4u + 1u;
const uint Q0 = 0u;
const uint KV0 = Q0 + BR * LDQ;
const uint S0 = KV0 + BC * LDQ;
const uint P0 = S0 + BR * LDS;
const uint A0 = P0 + BR * LDP;
const uint TILES = A0 + BR * LDA;
const uint STAGE = BR * LDO;
shared uvec4 sm[TILES > STAGE ? TILES : STAGE];

const uint TPR = WG / BR;           // threads of the softmax a query vector
const uint NSB = (BR / MS) * (BC / NS);  // S blocks
const uint NJ = HD / NS;            // O blocks a row of blocks
const uint NOB = (BR / MS) * NJ;    // O blocks
// Partial maxima, then partial sums, of each query vector's threads ([part][vector]); the sums L
// for the epilogue.
shared float red[2u * WG];

#include "gemm_split.glsl"
#define QVEC BR
#define HEAD HD
#include "attn_window_split.glsl"

#define ACC coopmat<float, gl_ScopeSubgroup, MS, NS, gl_MatrixUseAccumulator>
#define MAT_A coopmat<float16_t, gl_ScopeSubgroup, MS, KS, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeSubgroup, KS, NS, gl_MatrixUseB>

// Cache rows kb .. kb + BC of key/value head kvh into the KV region.
void stage_tile(bool values, uint kb, uint n_keys, uint kvh) {
    const uint units = HD / 8u;
    for (uint e = gl_LocalInvocationID.x; e < BC * units; e += WG) {
        uint k = e / units, c = e % units;
        uvec4 x = uvec4(0u);
        if (kb + k < n_keys) {
            uint i = (kv_row(kb + k) * p.n_kv + kvh) * units + c;
            x = values ? vc[i] : kc[i];
        }
        sm[KV0 + k * LDQ + c] = x;
    }
}

// Scores of keys kb + 2·c2 and the next one for query vector q, -inf where masked.
vec2 score_pair(uint q, uint c2, uint kb, uint last, uint n_keys) {
    uvec4 w = sm[S0 + q * LDS + c2 / 2u];
    vec2 s = uintBitsToFloat((c2 & 1u) == 0u ? w.xy : w.zw);
    uint key = kb + 2u * c2;
    return vec2(key <= last && key < n_keys ? s.x : NEG_INF,
                key + 1u <= last && key + 1u < n_keys ? s.y : NEG_INF);
}

// Output dim d of query vector q (row r0 + q / group, head h0 + q % group), normalized, times
// sigmoid(gate) when the layer is gated; rows past the window are not written.
void store_out(uint q, uint d, float v) {
    const uint r = gl_WorkGroupID.y * (BR / p.group) + q / p.group;
    const uint h = gl_WorkGroupID.x * p.group + q % p.group;
    if (r >= p.n_rows) return;
    if (p.gate_off != 0xffffffffu)
        v *= 1.0 / (1.0 + exp(-act[p.gate_off + r * p.gate_row + h * p.gate_stride + d]));
    act[p.o_off + r * p.o_row + h * HD + d] = v;
}

void main() {
    const uint t = gl_LocalInvocationID.x;
    const uint g = p.group, rows = BR / g;
    const uint h0 = gl_WorkGroupID.x * g, r0 = gl_WorkGroupID.y * rows;
    const uint kvh = h0 / (p.n_head / p.n_kv);
    const uint pos0 = tok[0];
    const uint n_keys = pos0 + min(r0 + rows, p.n_rows);  // keys the last live row sees
    const uint sg = gl_SubgroupID, nsg = gl_NumSubgroups;

    // Queries, scaled and rounded to F16; rows past the window are zero (finite, never written).
    {
        const uint units = HD / 8u;
        for (uint e = t; e < BR * units; e += WG) {
            uint q = e / units, c = e % units;
            uint r = r0 + q / g;
            uvec4 x = uvec4(0u);
            if (r < p.n_rows) {
                uint b = p.q_off + (r * p.n_head + h0 + q % g) * HD + 8u * c;
                for (uint j = 0u; j < 4u; ++j)
                    x[j] = packHalf2x16(vec2(act[b + 2u * j], act[b + 2u * j + 1u]) * p.scale);
            }
            sm[Q0 + q * LDQ + c] = x;
        }
    }

    // Softmax roles: thread t serves query vector sq with column pairs part, part + TPR, ...
    const uint sq = t / TPR, part = t % TPR;
    const uint last = pos0 + r0 + sq / g;  // the causal mask: keys 0 .. last
    float m = NEG_INF;  // running max of vector sq (every thread of it keeps its own copy)
    float l = 0.0;      // running sum of vector sq (its thread part 0)

    // Unrolled loops over o keep its blocks in registers (no dynamic index into the array).
    ACC o[FPS];
    [[unroll]] for (uint i = 0u; i < FPS; ++i) o[i] = ACC(0.0);

    uint kb0, kb1;
    split_keys(pos0, n_keys, BC, kb0, kb1);
    for (uint kb = kb0; kb < kb1; kb += BC) {
        stage_tile(false, kb, n_keys, kvh);
        barrier();

        for (uint b = sg; b < NSB; b += nsg) {
            uint bi = b / (BC / NS), bj = b % (BC / NS);
            ACC s = ACC(0.0);
            for (uint k = 0u; k < HD; k += KS) {
                MAT_A qa;
                MAT_B kt;
                coopMatLoad(qa, sm, Q0 + bi * MS * LDQ + k / 8u, LDQ,
                            gl_CooperativeMatrixLayoutRowMajor);
                // Kᵀ: column n of the block is key row bj·NS + n of the tile.
                coopMatLoad(kt, sm, KV0 + bj * NS * LDQ + k / 8u, LDQ,
                            gl_CooperativeMatrixLayoutColumnMajor);
                s = coopMatMulAdd(qa, kt, s);
            }
            coopMatStore(s, sm, S0 + bi * MS * LDS + bj * NS / 4u, LDS,
                         gl_CooperativeMatrixLayoutRowMajor);
        }
        barrier();

        stage_tile(true, kb, n_keys, kvh);  // the keys were last read before the barrier above
        float mx = NEG_INF;
        for (uint c2 = part; c2 < BC / 2u; c2 += TPR) {
            vec2 s = score_pair(sq, c2, kb, last, n_keys);
            mx = max(mx, max(s.x, s.y));
        }
        red[part * BR + sq] = mx;
        barrier();

        float m_new = m;
        for (uint i = 0u; i < TPR; ++i) m_new = max(m_new, red[i * BR + sq]);
        const float alpha = exp(m - m_new);  // 0 on the first tile (m = -inf, m_new finite)
        m = m_new;
        float sum = 0.0;
        for (uint c2 = part; c2 < BC / 2u; c2 += TPR) {
            vec2 e = exp(score_pair(sq, c2, kb, last, n_keys) - m_new);
            sum += e.x + e.y;
            sm[P0 + sq * LDP + c2 / 4u][c2 & 3u] = packHalf2x16(e);
        }
        red[WG + part * BR + sq] = sum;
        for (uint c = part; c < NS; c += TPR)
            sm[A0 + sq * LDA + c / 4u][c & 3u] = floatBitsToUint(alpha);
        barrier();

        [[unroll]] for (uint i = 0u; i < FPS; ++i) {
            uint b = sg + i * nsg;
            if (b < NOB) {
                uint bi = b / NJ, bj = b % NJ;
                ACC a;
                coopMatLoad(a, sm, A0 + bi * MS * LDA, LDA, gl_CooperativeMatrixLayoutRowMajor);
                o[i] = o[i] * a;
                for (uint k = 0u; k < BC; k += KS) {
                    MAT_A pa;
                    MAT_B vb;
                    coopMatLoad(pa, sm, P0 + bi * MS * LDP + k / 8u, LDP,
                                gl_CooperativeMatrixLayoutRowMajor);
                    coopMatLoad(vb, sm, KV0 + k * LDQ + bj * NS / 8u, LDQ,
                                gl_CooperativeMatrixLayoutRowMajor);
                    o[i] = coopMatMulAdd(pa, vb, o[i]);
                }
            }
        }
        if (part == 0u) {
            float s = 0.0;
            for (uint i = 0u; i < TPR; ++i) s += red[WG + i * BR + sq];
            l = l * alpha + s;
        }
        barrier();  // the next tile rewrites every region
    }

    // The sums (and, split, the maxima) of each query vector for the epilogue.
    if (part == 0u) {
        red[sq] = l;
        red[WG + sq] = m;
    }
    const bool split = p.splits > 1u;
    for (uint c0 = 0u; c0 < HD; c0 += OC) {
        [[unroll]] for (uint i = 0u; i < FPS; ++i) {
            uint b = sg + i * nsg;
            if (b < NOB) {
                uint bi = b / NJ, col = (b % NJ) * NS;
                if (col >= c0 && col < c0 + OC)
                    coopMatStore(o[i], sm, bi * MS * LDO + (col - c0) / 4u, LDO,
                                 gl_CooperativeMatrixLayoutRowMajor);
            }
        }
        barrier();
        for (uint e = t; e < BR * OC; e += WG) {
            uint q = e / OC, c = e % OC;
            float v = uintBitsToFloat(sm[q * LDO + c / 4u][c & 3u]);
            if (split)  // (unnormalized: the last part merges)
                split_f[split_out(gl_WorkGroupID.z, q, c0 + c)] = v;
            else
                store_out(q, c0 + c, v / red[q]);
        }
        barrier();  // the next pass rewrites the staging
    }
    if (!split) return;
    for (uint q = t; q < BR; q += WG) {
        split_f[split_max(gl_WorkGroupID.z, q)] = red[WG + q];
        split_f[split_sum(gl_WorkGroupID.z, q)] = red[q];
    }
    if (!split_last(split_block())) return;
    // Each part's weight of each query vector ([part][vector], floats in the staging's place).
    for (uint q = t; q < BR; q += WG) {
        float w[SPLIT_MAX_PARTS];
        split_weights(q, w);
        for (uint z = 0u; z < p.splits; ++z) {
            const uint i = z * BR + q;
            sm[i / 4u][i & 3u] = floatBitsToUint(w[z]);
        }
    }
    barrier();
    for (uint e = t; e < BR * HD; e += WG) {
        uint q = e / HD, d = e % HD;
        float v = 0.0;
        for (uint z = 0u; z < p.splits; ++z) {
            const uint i = z * BR + q;
            v += uintBitsToFloat(sm[i / 4u][i & 3u]) * split_f[split_out(z, q, d)];
        }
        store_out(q, d, v);
    }
}
