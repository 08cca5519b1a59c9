// Decode attention of one token, split over the KV length (flash decoding). Workgroup (head
// group hg, split s) serves the G query heads hg·G .. hg·G + G - 1, which share one key/value
// head, so each cache row is read once for all of them. The cache is walked in chunks of CH rows
// with an online softmax (running max m, sum of weights l, unnormalised output o a head); the
// live chunks are dealt to the splits in runs of equal length, so however long the context, a
// split walks a few runs and the grid stays n_split workgroups a head group.
//
// The number of splits is fixed when the command is recorded (at most MAXS); their length follows
// the current position: chunks = ceil((pos + 1) / CH), cps = ceil(chunks / n_split) chunks a split,
// and splits past the live ones return at once. So nothing is re-recorded as the context grows,
// and a long context costs nothing before it is used. A context of up to one_split chunks is
// walked whole by the first split, and a walk with one live split writes the heads' output
// itself: no partials, no merge.
//
// The merge needs no stage of its own: each live split, its partial (m, l, o of each of its heads)
// stored and made available device-wide, counts itself on counter[hg]; the last of the group to
// arrive merges (with M the largest split max, o = Σ e^(m_s - M) o_s / Σ e^(m_s - M) l_s),
// multiplies by sigmoid(gate) when gate_off is given (qwen35's gated attention), writes the heads'
// output and sets the counter back to 0 for the next dispatch (as gemv.comp's norm epilogue).
//
// A chunk, by phases:
//  - scores: TPR = WG / CH threads a row, each a share of the row's 16-byte vectors (interleaved,
//    so neighbouring threads read neighbouring bytes) against the G queries in shared memory; the
//    shares are summed through shared memory. Right after its scores a thread requests its share
//    of the next chunk's keys, so their latency passes under this chunk's weights and values
//    (H200, tg128 at 16384 positions: Qwen3.5-9B 283.1 -> 292.9 t/s; its variant went from 64 to
//    125 registers, which its grid of two workgroups a multiprocessor still fits);
//  - the chunk's max and the rescale of each head by one thread a head (vec4 reads of the scores),
//    then the weights e^(score - m) by every thread;
//  - values: thread t takes word t % HD2 of row group t / HD2 (RQ = WG / HD2 groups): under
//    VPRE the group's block of VSTEP consecutive rows, all loaded at once before the scores;
//    otherwise the rows t / HD2, + RQ, ..., VSTEP loads in flight at a time. It accumulates all
//    G heads from each load.
// The row groups' outputs are summed through shared memory once, at the end of the split.
//
// The kernel prepares its queries itself from the raw projections (per-head RMSNorm of q when
// qn_off is given, rotary embedding of the first n_rot dims in NeoX pairs (j, j + n_rot/2) or,
// interleaved, (2j, 2j + 1)), so no preparation stage runs before it. The last live split, the
// only one that reads row pos, prepares the token's own key and value row the same way (k norm
// when kn_off is given) into shared memory and reads that row from there; the first head group of
// each key/value head also stores it to the cache. No workgroup uses row pos from the cache: the
// value rows read whole chunks at a time (VPRE) read it, racing with that store, and leave it
// unused. What the preparation and the gates read is requested before any
// of it is waited on: at a short context the kernel is a chain of latencies, and each load
// waited on alone was a link of it.
//
// Workgroup z is a batch's row (a sequence of its own): its words (position, block table) at
// tok[z · tok_row], its partials z · part_row floats on, its counters z · counter_row words on,
// and its raw query, key and value, gate and output z rows on in act (strides q_row, k_row,
// o_row). One dispatch then serves every row of a batched step.
//
// ROUND_O: the workgroup that writes a head group's output also rounds it to signed bytes by
// 16-value blocks (round_bytes.glsl: block e's four words of bytes at ro_off + 4e, its scale and
// scaled sum at ro_off + n / 4 + 2e, n = n_head · HD), the layout an output projection reads
// under gemv_tile.comp XMODE 0, so that projection's workgroups copy bytes rather than each
// rounding all of the output: one thread a block, after the outputs meet in shared memory.
#version 450

#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;  // threads: a multiple of CH, at least HD / 2
layout(constant_id = 1) const uint HD = 128;  // head_dim (even)
layout(constant_id = 2) const uint G = 1;     // query heads a workgroup (of one key/value head)
layout(constant_id = 3) const uint VSTEP = 8;  // value rows a thread loads at once (its rows of a chunk)
// 1: a thread's value rows of the chunk, a block of VSTEP (VSTEP · RQ = CH, the launcher sees to
// it), are loaded before the scores, so their latency passes under the scores' loads and
// reductions.
layout(constant_id = 4) const uint VPRE = 0;
layout(constant_id = 5) const uint ROUND_O = 0;  // 1: the output rounded too (see the top)

const uint CH = 64u;    // cache rows a chunk
const uint MAXS = 64u;  // splits at most (Kernels::kAttnMaxSplits)
const uint TPR = WG / CH;
const uint HD2 = HD / 2u;                   // words (F16 pairs) of a cache row of one head
const bool VEC = HD2 % 4u == 0u;            // rows start 16-byte aligned
const uint HD8 = VEC ? HD2 / 4u : 1u;       // a row's 16-byte vectors (at least one declared)
const uint KI = VEC ? (HD8 + TPR - 1u) / TPR : (HD2 + TPR - 1u) / TPR;  // a thread's share
const uint RQ = WG / HD2;                   // row groups of the value phase
const uint OPT = (G * HD + WG - 1u) / WG;   // outputs a thread at the merge
const uint QW = (G * HD2 + WG - 1u) / WG;   // query words a thread rotates (and outputs' pairs)
const uint KW = (HD2 + WG - 1u) / WG;       // a thread's words of the token's key (and value)
const uint MSTEP = 8u;                      // splits whose partials a merge step loads at once

layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 0) buffer ActU { uint act_u[]; };  // ROUND_O: the output's bytes
// The caches are read through readonly views; row pos is stored through the writeonly ones (the
// same memory; that row is never read through the others in this dispatch).
layout(std430, binding = 1) readonly buffer KCache { uint kc[]; };
layout(std430, binding = 1) readonly buffer KCache4 { uvec4 kc4[]; };
layout(std430, binding = 1) writeonly buffer KCacheW { uint kcw[]; };
layout(std430, binding = 2) readonly buffer VCache { uint vc[]; };
layout(std430, binding = 2) writeonly buffer VCacheW { uint vcw[]; };
layout(std430, binding = 3) coherent buffer Part { float part[]; };
layout(std430, binding = 4) readonly buffer Tok { uint tok[]; };
layout(std430, binding = 5) buffer Counter { uint counter[]; };  // [n_head / G], 0 between dispatches
layout(std430, binding = 6) readonly buffer Params { float prm[]; };  // norms, frequencies
#include "kv_pages.glsl"

layout(push_constant) uniform Push {
    uint n_head, n_kv, head_dim;
    uint q_off;     // act: raw query head h at q_off + h * q_stride
    uint n_split;   // <= MAXS
    float scale;    // 1/sqrt(head_dim)
    uint gate_off, gate_stride;  // act: gate of head h at gate_off + h * gate_stride; ~0u: none
    uint o_off;                  // act: output [n_head][head_dim]
    uint q_stride;
    uint k_off, v_off;     // act: raw key / value head j at k_off / v_off + j * head_dim
    uint qn_off, kn_off;   // prm: q / k norm weights (head_dim), or ~0u for none
    uint freq_off, n_rot;  // prm: inverse frequencies (n_rot / 2); the rotated dims
    float eps;
    uint interleaved;      // 0: NeoX pairs (qwen); 1: pairs (2j, 2j + 1) (llama)
    uint one_split;        // contexts of up to this many chunks: one split, no merge
    uint ro_off;           // ROUND_O: act, the output's rounding
    uint tok_row, part_row, counter_row;  // a batch's rows (workgroup z): words, floats, words
    uint q_row, k_row, o_row;             // ... and their act strides (the gate's is q_row)
} p;

// This workgroup's row (workgroup z): where its partials, counters and act values start.
uint part0 = 0u, counter0 = 0u;
uint q_off = 0u, gate_off = 0xffffffffu, o_off = 0u, k_off = 0u, v_off = 0u;

shared vec2 qs[G * HD2];      // the G queries
shared vec4 sc[G * CH / 4u];  // a chunk's scores, then its weights, head by head
const uint REDN = WG > 2u * MAXS ? WG : 2u * MAXS;
shared float red[G * REDN];  // score shares; at the merge, the splits' maxima and sums
shared float hm[G], hl[G], ha[G];  // a head's running max and sum, and this chunk's rescale
// The row groups' outputs (RQ · HD2 <= WG); before the walk, the preparation's scratch.
shared vec2 ored[G * WG];
shared uint last_split;
shared uint knew[HD2], vnew[HD2];  // the token's own key and value row
shared float ro[ROUND_O != 0u ? G * HD : 1u];  // ROUND_O: the group's outputs
#include "reduce.glsl"
#define ROUND_ONLY
#define ROUND_TO_ACT
#include "round_bytes.glsl"

float score_at(uint g, uint j) { return sc[(g * CH + j) >> 2][j & 3u]; }
// The merge's rows of red: head g's split maxima (then their weights), and its split sums.
uint merge_m(uint g, uint s) { return g * 2u * MAXS + s; }
uint merge_l(uint g, uint s) { return g * 2u * MAXS + MAXS + s; }

// The gate's logit of dim dd of head h (qwen35's gated attention; 0 where ungated).
float gate_logit(uint h, uint dd) {
    return gate_off != 0xffffffffu ? act[gate_off + h * p.gate_stride + dd] : 0.0;
}

// Dim dd of head h's output, normalised: times sigmoid(gate) where the model gates it (gl, the
// gate's logit).
void write_output(uint h, uint dd, float o, float gl) {
    if (gate_off != 0xffffffffu) o *= 1.0 / (1.0 + exp(-gl));
    act[o_off + h * HD + dd] = o;
    if (ROUND_O != 0u) ro[(h % G) * HD + dd] = o;
}

// ROUND_O: the outputs of heads h0 .. h0 + G - 1 (in ro) rounded, a thread a 16-value block. Every
// invocation of the workgroup calls it (a barrier first).
void round_output(uint h0, uint t) {
    barrier();
    for (uint b = t; b < G * HD / 16u; b += WG) {
        vec4 v[4];
        [[unroll]] for (uint i = 0u; i < 4u; ++i)
            v[i] = vec4(ro[16u * b + 4u * i], ro[16u * b + 4u * i + 1u], ro[16u * b + 4u * i + 2u],
                        ro[16u * b + 4u * i + 3u]);
        store_rounded_block(v, p.ro_off, p.n_head * HD, h0 * HD / 16u + b);
    }
}

// Word w of key/value head kvh in the sequence's cache row `row` (pool rows [n_kv][HD2] words,
// kv_pages.glsl). A chunk's rows are consecutive pool rows (CH divides KV_BLOCK).
uint cache_word(uint row, uint kvh, uint w) { return (kv_row(row) * p.n_kv + kvh) * HD2 + w; }

// Partial of head h, split s: (m, l, o[HD]).
uint part_base(uint h, uint s) { return part0 + (h * p.n_split + s) * (HD + 2u); }

// The heads being prepared lie in ored, seen as floats, until the walk needs it.
float scratch(uint i) { return ored[i >> 1][i & 1u]; }

// The rotary frequency of element i of a head (0 past the rotated dims).
float rope_freq(uint i) {
    if (i >= p.n_rot) return 0.0;
    const uint half_rot = p.n_rot / 2u;
    const uint pair = p.interleaved != 0u ? i / 2u : (i < half_rot ? i : i - half_rot);
    return prm[p.freq_off + pair];
}

// Element i of the head at scratch[b ..] after the rotary embedding at position pos; f is
// rope_freq(i).
float roped(uint b, uint i, uint pos, float f) {
    float x = scratch(b + i);
    if (i >= p.n_rot) return x;
    const uint half_rot = p.n_rot / 2u;
    const bool inter = p.interleaved != 0u;
    const bool first = inter ? (i & 1u) == 0u : i < half_rot;
    const uint partner = inter ? (first ? i + 1u : i - 1u) : (first ? i + half_rot : i - half_rot);
    const float ang = float(pos) * f;
    return x * cos(ang) + (first ? -sin(ang) : sin(ang)) * scratch(b + partner);
}

// RMSNorm (weights at nw, ~0u: none) of `heads` heads of HD values, each by WG / heads
// consecutive invocations. A thread holds at most NE values of them (heads <= G).
const uint NE = (G * HD + WG - 1u) / WG;
// This thread's values of head k read from act[src + k * stride ..], and their norm weights.
void load_heads(uint heads, uint src, uint stride, uint nw, out float x[NE], out float w[NE]) {
    const uint tph = WG / heads, k = gl_LocalInvocationID.x / tph, l = gl_LocalInvocationID.x % tph;
    [[unroll]] for (uint e = 0; e < NE; ++e) {
        uint i = l + e * tph;
        x[e] = i < HD ? act[src + k * stride + i] : 0.0;
        w[e] = i < HD && nw != 0xffffffffu ? prm[nw + i] : 1.0;
    }
}
// The heads normed from what load_heads gave, into scratch[k * HD ..]; the caller's barrier
// makes them visible.
void normed_heads(uint heads, uint nw, float x[NE], float w[NE]) {
    const uint tph = WG / heads, k = gl_LocalInvocationID.x / tph, l = gl_LocalInvocationID.x % tph;
    float ss = 0.0;
    [[unroll]] for (uint e = 0; e < NE; ++e) ss += x[e] * x[e];
    const float tot = seg_sum(ss, tph);  // every invocation takes part (uniform control flow)
    const float sc = nw != 0xffffffffu ? inversesqrt(tot / float(HD) + p.eps) : 1.0;
    [[unroll]] for (uint e = 0; e < NE; ++e) {
        uint i = l + e * tph;
        if (i >= HD) break;
        ored[(k * HD + i) >> 1][i & 1u] = x[e] * sc * w[e];
    }
}

// Word w (or 16-byte vector v) of a cache row whose first word is `base`; the token's own row
// (row == pos) comes from shared memory, as its cache row is stored in this dispatch.
uint key_word(uint row, uint pos, uint base, uint w) {
    return row == pos ? knew[w] : kc[base + w];
}
uvec4 key_vec(uint row, uint pos, uint base, uint v) {
    if (row == pos)
        return uvec4(knew[4u * v], knew[4u * v + 1u], knew[4u * v + 2u], knew[4u * v + 3u]);
    return kc4[base / 4u + v];
}
uint value_word(uint row, uint pos, uint kvh, uint w) {
    return row == pos ? vnew[w] : vc[cache_word(row, kvh, w)];
}

// A thread's share of the key vectors of row j of chunk c (rows past the live ones clamped).
void load_keys(uint c, uint n_rows, uint pos, uint kvh, uint j, uint share, out uvec4 k[KI]) {
    const uint r0 = c * CH, n_live = min(CH, n_rows - r0);
    const uint krow = r0 + min(j, n_live - 1u), base = cache_word(krow, kvh, 0u);
    [[unroll]] for (uint i = 0; i < KI; ++i) {
        uint v = share + i * TPR;
        k[i] = v < HD8 ? key_vec(krow, pos, base, v) : uvec4(0u);
    }
}

void main() {
    const uint hg = gl_WorkGroupID.x, s = gl_WorkGroupID.y, t = gl_LocalInvocationID.x;
    const uint h0 = hg * G, kvh = h0 / (p.n_head / p.n_kv);
    const uint brow = gl_WorkGroupID.z;  // the batch's row
    kv_words = brow * p.tok_row;
    part0 = brow * p.part_row;
    counter0 = brow * p.counter_row;
    q_off = p.q_off + brow * p.q_row;
    gate_off = p.gate_off != 0xffffffffu ? p.gate_off + brow * p.q_row : 0xffffffffu;
    o_off = p.o_off + brow * p.o_row;
    k_off = p.k_off + brow * p.k_row;
    v_off = p.v_off + brow * p.k_row;
    // What the preparation and a one-split walk's output read, and no stage of this dispatch
    // writes, is requested before anything waits on a load (the position included), so their
    // latencies pass together, not one after another: the G raw queries and the token's raw key
    // with their norm weights, the rotary frequencies of the elements this thread rotates, its
    // words of the token's value row, and the gates' logits of the outputs it writes.
    float qx[NE], qw[NE], kx[NE], kw[NE];
    load_heads(G, q_off + h0 * p.q_stride, p.q_stride, p.qn_off, qx, qw);
    load_heads(1u, k_off + kvh * HD, 0u, p.kn_off, kx, kw);
    vec2 qf[QW], gates[QW];  // query word i = t + k · WG: its elements' frequencies, its gates
    [[unroll]] for (uint k = 0; k < QW; ++k) {
        uint i = min(t + k * WG, G * HD2 - 1u), w = i % HD2, h = h0 + i / HD2;
        qf[k] = vec2(rope_freq(2u * w), rope_freq(2u * w + 1u));
        gates[k] = vec2(gate_logit(h, 2u * w), gate_logit(h, 2u * w + 1u));
    }
    vec2 kf[KW], vn[KW];  // key / value word w = t + k · WG: its frequencies, its values
    [[unroll]] for (uint k = 0; k < KW; ++k) {
        uint w = min(t + k * WG, HD2 - 1u);
        kf[k] = vec2(rope_freq(2u * w), rope_freq(2u * w + 1u));
        vn[k] = vec2(act[v_off + kvh * HD + 2u * w], act[v_off + kvh * HD + 2u * w + 1u]);
    }
    const uint pos = tok[kv_words], n_rows = pos + 1u;
    const uint chunks = (n_rows + CH - 1u) / CH;
    const uint cps = chunks <= p.one_split ? chunks : (chunks + p.n_split - 1u) / p.n_split;
    const uint live = (chunks + cps - 1u) / cps;
    if (s >= live) return;  // uniform per workgroup
    const uint c0 = s * cps, c1 = min(c0 + cps, chunks);

    // The G queries: normed into the scratch, rotated into qs.
    normed_heads(G, p.qn_off, qx, qw);
    barrier();
    [[unroll]] for (uint k = 0; k < QW; ++k) {
        uint i = t + k * WG;
        if (i >= G * HD2) break;
        uint b = (i / HD2) * HD, w = i % HD2;
        qs[i] = vec2(roped(b, 2u * w, pos, qf[k].x), roped(b, 2u * w + 1u, pos, qf[k].y));
    }
    if (s == live - 1u) {  // uniform per workgroup: the split that reads row pos
        barrier();         // the scratch is read above
        normed_heads(1u, p.kn_off, kx, kw);
        barrier();
        const bool owner = h0 % (p.n_head / p.n_kv) == 0u;  // the first group of kvh
        [[unroll]] for (uint k = 0; k < KW; ++k) {
            uint w = t + k * WG;
            if (w >= HD2) break;
            knew[w] = packHalf2x16(
                vec2(roped(0u, 2u * w, pos, kf[k].x), roped(0u, 2u * w + 1u, pos, kf[k].y)));
            vnew[w] = packHalf2x16(vn[k]);
            if (owner) {
                kcw[cache_word(pos, kvh, w)] = knew[w];
                vcw[cache_word(pos, kvh, w)] = vnew[w];
            }
        }
    }
    if (t < G) {
        hm[t] = -1.0 / 0.0;
        hl[t] = 0.0;
    }
    barrier();

    const uint j = t / TPR, share = t % TPR;  // scores: row j of the chunk, this share of it
    const uint vw = t % HD2, vq = t / HD2;    // values: word vw of row group vq (live if < RQ)
    vec2 o[G];
    [[unroll]] for (uint g = 0; g < G; ++g) o[g] = vec2(0.0);
    // VEC: this chunk's keys, requested while the chunk before formed its weights and values;
    // the first chunk's in a round of their own before the walk (c = c0 - 1), so the loads'
    // code is there once.
    uvec4 keys[KI];
    for (int ci = int(c0) - (VEC ? 1 : 0); ci < int(c1); ++ci) {
        const uint c = uint(ci);
        const bool walk = ci >= int(c0);  // uniform
        const uint r0 = c * CH, n_live = min(CH, n_rows - r0);
        // Scores: rows past the live ones are read clamped and masked below.
        float d[G];
        [[unroll]] for (uint g = 0; g < G; ++g) d[g] = 0.0;
        // VPRE: a thread's rows vq · VSTEP .. + VSTEP - 1 of the chunk (VSTEP · RQ = CH), read
        // past the live ones too (the caches hold whole chunks, Kernels::attention_cache_bytes),
        // at one stride from one address; rows from n_use on count as zeros below, row pos
        // among them.
        const uint n_use = r0 + n_live == n_rows ? n_live - 1u : n_live;
        uint vraw[VSTEP];
        if (VPRE != 0u && walk && vq < RQ) {
            const uint vb = cache_word(r0 + vq * VSTEP, kvh, vw), vs = p.n_kv * HD2;
            [[unroll]] for (uint u = 0; u < VSTEP; ++u) vraw[u] = vc[vb + u * vs];
        }
        if (VEC) {
            if (walk) {
                [[unroll]] for (uint i = 0; i < KI; ++i) {
                    uint v = share + i * TPR;
                    if (v >= HD8) continue;
                    vec2 k0 = unpackHalf2x16(keys[i].x), k1 = unpackHalf2x16(keys[i].y);
                    vec2 k2 = unpackHalf2x16(keys[i].z), k3 = unpackHalf2x16(keys[i].w);
                    [[unroll]] for (uint g = 0; g < G; ++g) {
                        uint q = g * HD2 + 4u * v;
                        d[g] += dot(k0, qs[q]) + dot(k1, qs[q + 1u]) + dot(k2, qs[q + 2u]) +
                                dot(k3, qs[q + 3u]);
                    }
                }
            }
            if (c + 1u < c1) load_keys(c + 1u, n_rows, pos, kvh, j, share, keys);
            if (!walk) continue;
        } else {
            const uint krow = r0 + min(j, n_live - 1u), base = cache_word(krow, kvh, 0u);
            [[unroll]] for (uint i = 0; i < KI; ++i) {
                uint w = share + i * TPR;
                if (w >= HD2) continue;
                vec2 kf = unpackHalf2x16(key_word(krow, pos, base, w));
                [[unroll]] for (uint g = 0; g < G; ++g) d[g] += dot(kf, qs[g * HD2 + w]);
            }
        }
        [[unroll]] for (uint g = 0; g < G; ++g) red[g * REDN + t] = d[g];
        barrier();
        for (uint i = t; i < G * CH; i += WG) {
            uint g = i / CH, jj = i % CH;
            float acc = 0.0;
            [[unroll]] for (uint q = 0; q < TPR; ++q) acc += red[g * REDN + jj * TPR + q];
            sc[i >> 2][i & 3u] = jj < n_live ? acc * p.scale : -1.0 / 0.0;
        }
        barrier();
        // The chunk's max; the running sums and outputs rescale to the new max.
        if (t < G) {
            vec4 mx = vec4(-1.0 / 0.0);
            [[unroll]] for (uint i = 0; i < CH / 4u; ++i) mx = max(mx, sc[t * CH / 4u + i]);
            float m = hm[t], mn = max(m, max(max(mx.x, mx.y), max(mx.z, mx.w)));
            ha[t] = exp(m - mn);  // 0 at the first chunk (m = -inf; mn is finite)
            hm[t] = mn;
        }
        barrier();
        for (uint i = t; i < G * CH; i += WG) sc[i >> 2][i & 3u] = exp(sc[i >> 2][i & 3u] - hm[i / CH]);
        barrier();
        if (t < G) {
            vec4 sum = vec4(0.0);
            [[unroll]] for (uint i = 0; i < CH / 4u; ++i) sum += sc[t * CH / 4u + i];
            hl[t] = hl[t] * ha[t] + dot(sum, vec4(1.0));
        }
        // Values: the weights and rescales are read only until the next chunk's first barrier.
        if (vq < RQ) {
            [[unroll]] for (uint g = 0; g < G; ++g) o[g] *= ha[g];
            if (VPRE != 0u) {
                // No branch a row: the weights of four rows a vec4 read where VSTEP allows.
                const uint j0 = vq * VSTEP;
                [[unroll]] for (uint u = 0; u < VSTEP; u += VSTEP % 4u == 0u ? 4u : 1u) {
                    [[unroll]] for (uint g = 0; g < G; ++g) {
                        vec4 w = VSTEP % 4u == 0u ? sc[(g * CH + j0 + u) >> 2]
                                                  : vec4(score_at(g, j0 + u), 0.0, 0.0, 0.0);
                        [[unroll]] for (uint e = 0; e < (VSTEP % 4u == 0u ? 4u : 1u); ++e) {
                            vec2 v = unpackHalf2x16(j0 + u + e < n_use ? vraw[u + e] : 0u);
                            o[g] += w[e] * v;
                        }
                    }
                }
                // Row pos (the last live row of the last chunk) from shared memory.
                if (n_use < n_live && n_use / VSTEP == vq) {
                    vec2 v = unpackHalf2x16(vnew[vw]);
                    [[unroll]] for (uint g = 0; g < G; ++g) o[g] += score_at(g, n_use) * v;
                }
            }
            for (uint j0 = vq; VPRE == 0u && j0 < n_live; j0 += VSTEP * RQ) {
                vec2 v[VSTEP];
                [[unroll]] for (uint u = 0; u < VSTEP; ++u) {
                    v[u] = unpackHalf2x16(value_word(r0 + min(j0 + u * RQ, n_live - 1u), pos, kvh, vw));
                }
                [[unroll]] for (uint u = 0; u < VSTEP; ++u) {
                    uint jr = j0 + u * RQ;
                    if (jr >= n_live) break;
                    [[unroll]] for (uint g = 0; g < G; ++g) o[g] += score_at(g, jr) * v[u];
                }
            }
        }
    }

    // The split's partials: the row groups' outputs summed, and each head's m and l. A split
    // that is the whole walk (uniform) writes the heads' output instead: no partials, no merge.
    barrier();
    if (vq < RQ) {
        [[unroll]] for (uint g = 0; g < G; ++g) ored[(g * RQ + vq) * HD2 + vw] = o[g];
    }
    barrier();
    [[unroll]] for (uint k = 0; k < QW; ++k) {
        uint i = t + k * WG;
        if (i >= G * HD2) break;
        uint g = i / HD2, w = i % HD2;
        vec2 sum = vec2(0.0);
        for (uint q = 0; q < RQ; ++q) sum += ored[(g * RQ + q) * HD2 + w];
        if (live == 1u) {
            const float inv_l = 1.0 / hl[g];
            write_output(h0 + g, 2u * w, sum.x * inv_l, gates[k].x);
            write_output(h0 + g, 2u * w + 1u, sum.y * inv_l, gates[k].y);
            continue;
        }
        uint b = part_base(h0 + g, s);
        part[b + 2u + 2u * w] = sum.x;
        part[b + 3u + 2u * w] = sum.y;
    }
    if (live == 1u) {
        if (ROUND_O != 0u) round_output(h0, t);
        return;
    }
    if (t < G) {
        part[part_base(h0 + t, s)] = hm[t];
        part[part_base(h0 + t, s) + 1u] = hl[t];
    }

    // Release the partials, count this split; the group's last live split merges (see the top).
    memoryBarrierBuffer();
    barrier();
    if (t == 0u) last_split = atomicAdd(counter[counter0 + hg], 1u) == live - 1u ? 1u : 0u;
    barrier();
    if (last_split == 0u) return;
    memoryBarrierBuffer();  // acquire: the other splits' partials
    for (uint i = t; i < G * live; i += WG) {
        uint g = i / live, ss = i % live, b = part_base(h0 + g, ss);
        red[merge_m(g, ss)] = part[b];
        red[merge_l(g, ss)] = part[b + 1u];
    }
    barrier();
    // Each head's largest max M (a thread a head), every split's weight e^(m_s - M) (every
    // thread), each head's 1 / Σ e^(m_s - M) l_s (a thread a head).
    if (t < G) {
        float M = -1.0 / 0.0;
        for (uint ss = 0; ss < live; ++ss) M = max(M, red[merge_m(t, ss)]);
        hm[t] = M;
    }
    barrier();
    for (uint i = t; i < G * live; i += WG) {
        uint g = i / live, r = merge_m(g, i % live);
        red[r] = exp(red[r] - hm[g]);
    }
    barrier();
    if (t < G) {
        float L = 0.0;
        for (uint ss = 0; ss < live; ++ss) L += red[merge_m(t, ss)] * red[merge_l(t, ss)];
        hl[t] = 1.0 / L;
    }
    barrier();
    // The outputs, OPT a thread: the partials' loads of MSTEP splits for all of them in flight at
    // once (one merging workgroup reads every split's outputs; a load at a time, a long context's
    // merge was a chain of cache latencies).
    float acc[OPT];
    [[unroll]] for (uint k = 0; k < OPT; ++k) acc[k] = 0.0;
    for (uint s0 = 0; s0 < live; s0 += MSTEP) {
        float v[OPT * MSTEP];
        [[unroll]] for (uint k = 0; k < OPT; ++k) {
            uint i = min(t + k * WG, G * HD - 1u);
            [[unroll]] for (uint u = 0; u < MSTEP; ++u)
                v[k * MSTEP + u] = part[part_base(h0 + i / HD, min(s0 + u, live - 1u)) + 2u + i % HD];
        }
        [[unroll]] for (uint k = 0; k < OPT; ++k) {
            uint g = min(t + k * WG, G * HD - 1u) / HD;
            [[unroll]] for (uint u = 0; u < MSTEP; ++u)
                if (s0 + u < live) acc[k] += red[merge_m(g, s0 + u)] * v[k * MSTEP + u];
        }
    }
    [[unroll]] for (uint k = 0; k < OPT; ++k) {
        uint i = t + k * WG;
        if (i >= G * HD) break;
        uint g = i / HD;
        write_output(h0 + g, i % HD, acc[k] * hl[g], gate_logit(h0 + g, i % HD));
    }
    if (t == 0u) atomicExchange(counter[counter0 + hg], 0u);
    if (ROUND_O != 0u) round_output(h0, t);
}
