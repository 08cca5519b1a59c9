// Causal attention for a window of query rows (prefill) over the F16 KV cache, as a tiled flash
// attention: a workgroup takes QV query vectors (a block of rows x a set of query heads that
// share one key/value head under GQA), walks the causal key range in tiles of BK keys staged in
// shared memory once for all QV of them, and keeps an online softmax (running max and sum per
// query vector), so neither the score matrix nor a second pass over the cache is needed. Row r
// (position tok[0] + r) attends to cache rows [0, tok[0] + r]. The epilogue divides by the
// softmax sum and, when gate_off is given, multiplies by sigmoid(gate) (the gated attention of
// qwen35).
//
// The tile shape comes from the launcher (specialization constants chosen from the device's
// shared memory): output phase, thread t owns dim pair t % W of QPT consecutive query vectors;
// score phase, a thread scores SK keys (kg, kg + NKG, ...) of one query vector. Query vector q of
// the workgroup is row r0 + q / group, head h0 + q % group.
//
// Score phase, two modules. Plain: the queries sit in shared memory and a thread forms whole dot
// products, so every multiply-add pair needs a shared load of its query and of its key
// (SK keys share one query load). SCORE_SHUFFLE: NSL neighbouring subgroup lanes share a query
// vector, each holding every NSL-th dim pair of it in registers for the whole key range; per
// key they sum their partial dots with xor shuffles, so only the key is loaded from shared memory
// (a third of the loads at SK = 2) and the 8·head_dim·QV bytes of staged queries are freed for
// longer key tiles. The launcher keeps NSL a power of two within the smallest subgroup size the
// device reports and derives the lane roles from the subgroup lane, so no subgroup size is
// assumed.
#version 450
#if defined(SCORE_SHUFFLE)
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 128;  // threads: W * (query groups of the output phase)
layout(constant_id = 1) const uint HD = 256;  // head_dim (even)
layout(constant_id = 2) const uint QV = 16;   // query vectors a workgroup
layout(constant_id = 3) const uint BK = 16;   // keys a tile
layout(constant_id = 4) const uint SK = 2;    // keys a thread scores against one query vector
layout(constant_id = 5) const uint NSL = 1;   // SCORE_SHUFFLE: lanes sharing a query vector (WG / QV)

const uint W = HD / 2u;     // dim pairs of a head
const uint QPT = QV / (WG / W);
const uint KST = W + 1u;    // tile row stride in pairs: the pad keeps rows on distinct banks
const uint NKG = BK / SK;   // key groups of the score phase
const uint NSB = QV * NKG;  // score blocks (query vector, key group)
const float NEG_INF = -1.0 / 0.0;

layout(std430, binding = 0) buffer Act { float act[]; };
layout(std430, binding = 1) readonly buffer KCache { uint kc[]; };
layout(std430, binding = 2) readonly buffer VCache { uint vc[]; };
layout(std430, binding = 3) readonly buffer Tok { uint tok[]; };
layout(std430, binding = 4) coherent buffer Split { uint split_u[]; };
layout(std430, binding = 5) coherent buffer SplitF { float split_f[]; };
#include "kv_pages.glsl"

layout(push_constant) uniform Push {
    uint n_head, n_kv, n_rows;
    uint group;                           // query heads a workgroup (divides QV and n_head / n_kv)
    uint q_off;                           // act: prepared queries [n][n_head][head_dim]
    uint o_off, o_row;                    // act: output head h of row r at o_off + r * o_row + h * head_dim
    uint gate_off, gate_stride, gate_row; // act: gate of head h of row r, or gate_off = ~0u
    float scale;                          // 1/sqrt(head_dim)
    uint splits;                          // parts of the keys (grid z; attn_window_split.glsl)
} p;

#if !defined(SCORE_SHUFFLE)
shared vec2 qs[W * QV];      // queries, [pair][query vector]
#endif
shared vec2 tile[BK * KST];  // keys, then values, of one tile as F32: [key][pair]
shared float pr[BK * QV];    // scores, then softmax weights: [key][query vector]
shared float pmax[NKG * QV]; // per key group maxima of the scores
shared float psum[NKG * QV]; // per key group sums of the weights
shared float mrow[2 * QV];   // running max before / after this tile (alternating halves)
shared float corr[QV];       // rescale of the accumulators for this tile, then the final sums

#include "gemm_split.glsl"
#define QVEC QV
#define HEAD HD
#include "attn_window_split.glsl"

// Cache rows kb .. kb + BK of key/value head kvh into the tile; rows past n_keys read as zero so
// that unwritten (possibly NaN) cache rows never reach a product.
void load_tile(bool values, uint kb, uint n_keys, uint kvh) {
    for (uint e = gl_LocalInvocationID.x; e < BK * W; e += WG) {
        uint k = e / W, w = e % W;
        vec2 x = vec2(0.0);
        if (kb + k < n_keys) {
            uint word = (kv_row(kb + k) * p.n_kv + kvh) * W + w;
            x = unpackHalf2x16(values ? vc[word] : kc[word]);
        }
        tile[k * KST + w] = x;
    }
}

// Score block sb: its query vector q and key group kg (keys kg, kg + NKG, ...). With shuffles the
// block is the thread's own (see score_id), NSL lanes a query vector.
void score_block(uint sb, out uint q, out uint kg) {
#if defined(SCORE_SHUFFLE)
    q = sb / NSL;
    kg = sb % NSL;
#else
    q = sb % QV;
    kg = sb / QV;
#endif
}

// The first score block of this thread.
uint score_id() {
#if defined(SCORE_SHUFFLE)
    return gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#else
    return gl_LocalInvocationID.x;
#endif
}

// Output dim pair w of query vector q (row r0 + q / group, head h0 + q % group), normalized,
// times sigmoid(gate) when the layer is gated; rows past the window are not written.
void store_out(uint q, uint w, vec2 v) {
    const uint r = gl_WorkGroupID.y * (QV / p.group) + q / p.group;
    const uint h = gl_WorkGroupID.x * p.group + q % p.group;
    if (r >= p.n_rows) return;
    const uint d = 2u * w;
    if (p.gate_off != 0xffffffffu) {
        uint gb = p.gate_off + r * p.gate_row + h * p.gate_stride + d;
        v *= 1.0 / (1.0 + exp(-vec2(act[gb], act[gb + 1u])));
    }
    uint ob = p.o_off + r * p.o_row + h * HD + d;
    act[ob] = v.x;
    act[ob + 1u] = v.y;
}

void main() {
    uint t = gl_LocalInvocationID.x;
    uint g = p.group, br = QV / p.group;
    uint h0 = gl_WorkGroupID.x * g, r0 = gl_WorkGroupID.y * br;
    uint kvh = h0 / (p.n_head / p.n_kv);
    uint pos0 = tok[0];
    uint n_keys = pos0 + min(r0 + br, p.n_rows);  // keys the last live row of the block sees

    // Rows past the window get zero queries: their lanes stay finite and are never written.
#if defined(SCORE_SHUFFLE)
    vec2 qr[W / NSL];  // dim pairs sl, sl + NSL, ... of query vector qq
    uint qq, sl;
    score_block(score_id(), qq, sl);
    {
        uint r = r0 + qq / g, b = p.q_off + (r * p.n_head + h0 + qq % g) * HD;
        for (uint i = 0u; i < W / NSL; ++i) {
            uint w = sl + NSL * i;
            qr[i] = r < p.n_rows ? vec2(act[b + 2u * w], act[b + 2u * w + 1u]) : vec2(0.0);
        }
    }
#else
    for (uint e = t; e < QV * W; e += WG) {
        uint q = e / W, w = e % W;
        uint r = r0 + q / g;
        vec2 x = vec2(0.0);
        if (r < p.n_rows) {
            uint b = p.q_off + (r * p.n_head + h0 + q % g) * HD + 2u * w;
            x = vec2(act[b], act[b + 1u]);
        }
        qs[w * QV + q] = x;
    }
#endif
    if (t < QV) mrow[t] = NEG_INF;
    float l = 0.0;  // softmax sum of query vector t (threads t < QV)
    uint ow = t % W, oq = (t / W) * QPT;
    vec2 o[QPT];
    for (uint i = 0u; i < QPT; ++i) o[i] = vec2(0.0);

    uint cur = 0u;
    uint kb0, kb1;
    split_keys(pos0, n_keys, BK, kb0, kb1);
    for (uint kb = kb0; kb < kb1; kb += BK) {
        load_tile(false, kb, n_keys, kvh);
        barrier();

#if defined(SCORE_SHUFFLE)
        {
            uint last = pos0 + r0 + qq / g;  // the causal mask: keys 0 .. last
            float mx = NEG_INF;
            for (uint k = 0u; k < BK; ++k) {
                float s = 0.0;
                for (uint i = 0u; i < W / NSL; ++i) s += dot(qr[i], tile[k * KST + sl + NSL * i]);
                for (uint m = 1u; m < NSL; m <<= 1) s += subgroupShuffleXor(s, m);
                if (k % NSL == sl) {
                    float v = kb + k <= last ? s * p.scale : NEG_INF;
                    pr[k * QV + qq] = v;
                    mx = max(mx, v);
                }
            }
            pmax[sl * QV + qq] = mx;
        }
#else
        for (uint sb = t; sb < NSB; sb += WG) {
            uint q, kg;
            score_block(sb, q, kg);
            float s[SK];
            for (uint j = 0u; j < SK; ++j) s[j] = 0.0;
            for (uint w = 0u; w < W; ++w) {
                vec2 x = qs[w * QV + q];
                for (uint j = 0u; j < SK; ++j) s[j] += dot(x, tile[(kg + NKG * j) * KST + w]);
            }
            uint last = pos0 + r0 + q / g;  // the causal mask: keys 0 .. last
            float mx = NEG_INF;
            for (uint j = 0u; j < SK; ++j) {
                uint k = kg + NKG * j;
                float v = kb + k <= last ? s[j] * p.scale : NEG_INF;
                pr[k * QV + q] = v;
                mx = max(mx, v);
            }
            pmax[kg * QV + q] = mx;
        }
#endif
        barrier();

        // Every row sees the first tile's first key (key 0, or a key of the history where the
        // keys are split), so each running max is finite from the first tile on and a fully
        // masked later tile only adds exp(-inf) = 0.
        for (uint sb = score_id(); sb < NSB; sb += WG) {
            uint q, kg;
            score_block(sb, q, kg);
            float m = mrow[cur * QV + q];
            for (uint i = 0u; i < NKG; ++i) m = max(m, pmax[i * QV + q]);
            float sum = 0.0;
            for (uint j = 0u; j < SK; ++j) {
                uint k = (kg + NKG * j) * QV + q;
                float e = exp(pr[k] - m);
                pr[k] = e;
                sum += e;
            }
            psum[kg * QV + q] = sum;
        }
        if (t < QV) {
            float m_old = mrow[cur * QV + t], m = m_old;
            for (uint i = 0u; i < NKG; ++i) m = max(m, pmax[i * QV + t]);
            mrow[(cur ^ 1u) * QV + t] = m;
            corr[t] = exp(m_old - m);  // 0 on the first tile (m_old = -inf)
        }
        load_tile(true, kb, n_keys, kvh);  // the keys were last read before the barrier above
        barrier();

        for (uint i = 0u; i < QPT; ++i) o[i] *= corr[oq + i];
        for (uint k = 0u; k < BK; ++k) {
            vec2 v = tile[k * KST + ow];
            for (uint i = 0u; i < QPT; ++i) o[i] += pr[k * QV + oq + i] * v;
        }
        if (t < QV) {
            float sum = 0.0;
            for (uint i = 0u; i < NKG; ++i) sum += psum[i * QV + t];
            l = l * corr[t] + sum;
        }
        cur ^= 1u;
        barrier();  // the next tile rewrites tile, pr, psum and corr
    }

    if (p.splits > 1u) {
        // This part's unnormalized output, running maxima and sums; the last part merges.
        const uint z = gl_WorkGroupID.z;
        for (uint i = 0u; i < QPT; ++i) {
            split_f[split_out(z, oq + i, 2u * ow)] = o[i].x;
            split_f[split_out(z, oq + i, 2u * ow + 1u)] = o[i].y;
        }
        if (t < QV) {
            split_f[split_max(z, t)] = mrow[cur * QV + t];
            split_f[split_sum(z, t)] = l;
        }
        if (!split_last(split_block())) return;
        for (uint i = 0u; i < QPT; ++i) {
            float w[SPLIT_MAX_PARTS];
            split_weights(oq + i, w);
            vec2 v = vec2(0.0);
            for (uint q = 0u; q < p.splits; ++q)
                v += w[q] * vec2(split_f[split_out(q, oq + i, 2u * ow)],
                                 split_f[split_out(q, oq + i, 2u * ow + 1u)]);
            store_out(oq + i, ow, v);
        }
        return;
    }
    if (t < QV) corr[t] = l;
    barrier();
    for (uint i = 0u; i < QPT; ++i) store_out(oq + i, ow, o[i] / corr[oq + i]);
}
