// Choosing the next token on the device at the end of the token command, so only its id returns
// to the host. Parameters come from the per-token buffer (written by the host each token):
// temperature <= 0 takes the argmax; otherwise the same chain as the host sampler
// (engine/sampler.h): top-k -> top-p -> min-p on the temperature-1 distribution, then the
// temperature and a draw with the uniform number u the host sampler would have drawn, so both
// pick the same token for the same seed. One workgroup:
//   1. the k-th largest logit, by a radix selection over the order-preserving integer keys of
//      the floats (kth_key.glsl: 4 counting passes over the row);
//   2. the logits at or above it gathered into shared memory (at most CAP; ties past that are
//      dropped) and bitonic-sorted by (logit descending, index ascending), so the result does not
//      depend on the order the threads found them in;
//   3. one thread walks the sorted candidates: top-p, min-p, temperature, the draw.
// 1 <= top_k <= KMAX is the host's to ensure (it samples itself otherwise).
// A NaN among the logits gives the token id 0xffffffff (no token) on every path, which the driver
// turns into an error: argmax and the radix selection would otherwise pass over it in silence.
// CANDIDATES: the entries are not the logits but the (logit, index) pairs that sample_chunks.comp
// kept of each chunk (index 0xffffffff: none); the order of the result is the same.
// Workgroup x is a batch's row: its words at tok[x · tok_row], its logits (or candidates) x ·
// l_row on; one dispatch chooses every row's token.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 1024;

#if defined(CANDIDATES)
layout(std430, binding = 0) readonly buffer Cand { uvec2 cd[]; };
#else
layout(std430, binding = 0) readonly buffer Logits { float lg[]; };
#endif
layout(std430, binding = 1) buffer Tok { uint tok[]; };

layout(push_constant) uniform Push {
    uint n;        // vocabulary (CANDIDATES: chunks)
    uint l_off;    // first logit (CANDIDATES: logits a chunk)
    uint out_idx;  // tok[out_idx] receives the token id
    uint par;      // tok[par ..]: temperature, top_k, top_p, min_p, u (floats as bits but top_k)
    uint tok_row;  // words from one row's tok words to the next's
    uint l_row;    // logits (CANDIDATES: pairs) from one row's to the next's
} p;

uint words = 0u, first = 0u;  // this workgroup's row: its tok words and its first entry

const uint CAP = 512;
shared float best_v[WG];
shared uint best_i[WG];
#include "best_of.glsl"
shared float cl[CAP];
shared uint ci[CAP];
shared uint cnt;
shared uint nan_seen;

bool is_nan(float v) { return (floatBitsToUint(v) & 0x7fffffffu) > 0x7f800000u; }

uint key(float f) {
    uint b = floatBitsToUint(f);
    return (b & 0x80000000u) != 0u ? ~b : (b | 0x80000000u);
}

// Entry e: its logit and token id; false when it holds none.
bool entry(uint e, out float v, out uint id) {
#if defined(CANDIDATES)
    uvec2 d = cd[first + e];
    v = uintBitsToFloat(d.x);
    id = d.y;
    return id != 0xffffffffu;
#else
    v = lg[first + e];
    id = e;
    return true;
#endif
}

shared uint kth_hist[256], kth_tmp[256], kth_sel[2];
bool kth_key_of(uint i, out uint kv) {
    float v;
    uint id;
    bool has = entry(i, v, id);
    kv = key(v);
    return has;
}
#include "kth_key.glsl"

// True when candidate a goes before candidate b.
bool before(uint a, uint b) { return cl[a] > cl[b] || (cl[a] == cl[b] && ci[a] < ci[b]); }

void main() {
    uint t = gl_LocalInvocationID.x;
    words = gl_WorkGroupID.x * p.tok_row;
#if defined(CANDIDATES)
    first = gl_WorkGroupID.x * p.l_row;
#else
    first = p.l_off + gl_WorkGroupID.x * p.l_row;
#endif
    float temp = uintBitsToFloat(tok[words + p.par]);
    uint k = tok[words + p.par + 1u];
    float top_p = uintBitsToFloat(tok[words + p.par + 2u]);
    float min_p = uintBitsToFloat(tok[words + p.par + 3u]);
    float u = uintBitsToFloat(tok[words + p.par + 4u]);
#if defined(CANDIDATES)
    // Each chunk left min(top_k, its length) entries (1 for greedy), chunk after chunk.
    const uint N = p.n * min(temp <= 0.0 ? 1u : k, p.l_off);
#else
    const uint N = p.n;
#endif

    if (t == 0u) nan_seen = 0u;
    barrier();

    if (temp <= 0.0) {  // argmax, the first index among equals
        float best = -1.0 / 0.0;
        uint bi = 0xffffffffu;
        for (uint i = t; i < N; i += WG) {
            float v;
            uint id;
            if (!entry(i, v, id)) continue;
            if (is_nan(v)) atomicOr(nan_seen, 1u);
            if (bi == 0xffffffffu || v > best || (v == best && id < bi)) {
                best = v;
                bi = id;
            }
        }
        best_of(best, bi);
        if (t == 0u) tok[words + p.out_idx] = nan_seen != 0u ? 0xffffffffu : best_i[0];
        return;
    }

    // 1. The key of the k-th largest logit (0 where there are fewer than k).
    const uint prefix = kth_largest_key(N, k);

    // 2. Gather and sort.
    if (t == 0u) cnt = 0u;
    barrier();
    for (uint i = t; i < N; i += WG) {
        float v;
        uint id;
        bool has = entry(i, v, id);
        if (has && is_nan(v)) atomicOr(nan_seen, 1u);
        if (has && key(v) >= prefix) {
            uint s = atomicAdd(cnt, 1u);
            if (s < CAP) {
                cl[s] = v;
                ci[s] = id;
            }
        }
    }
    barrier();
    uint m = min(cnt, CAP);
    for (uint i = t; i < CAP; i += WG) {
        if (i >= m) {
            cl[i] = -1.0 / 0.0;
            ci[i] = 0xffffffffu;
        }
    }
    barrier();
    for (uint size = 2u; size <= CAP; size <<= 1) {
        for (uint stride = size >> 1; stride > 0u; stride >>= 1) {
            for (uint i = t; i < CAP; i += WG) {
                uint j = i ^ stride;
                if (j > i) {
                    bool first_half = (i & size) == 0u;  // this block ends best-first
                    if (first_half ? before(j, i) : before(i, j)) {
                        float fv = cl[i];
                        cl[i] = cl[j];
                        cl[j] = fv;
                        uint iv = ci[i];
                        ci[i] = ci[j];
                        ci[j] = iv;
                    }
                }
            }
            barrier();
        }
    }

    // 3. The filters and the draw, as the host does them.
    if (t == 0u) {
        uint kk = min(k, m);
        float mx = cl[0];
        uint keep = kk;
        if (top_p < 1.0 && kk > 1u) {
            float z = 0.0;
            for (uint i = 0; i < kk; ++i) z += exp(cl[i] - mx);
            float target = max(top_p, 0.0) * z, cum = 0.0;
            for (uint i = 0; i < kk; ++i) {
                cum += exp(cl[i] - mx);
                if (cum >= target) {
                    keep = i + 1u;
                    break;
                }
            }
        }
        if (min_p > 0.0 && keep > 1u) {
            float th = mx + log(min(min_p, 1.0));
            uint n2 = 1u;
            while (n2 < keep && cl[n2] >= th) ++n2;
            keep = n2;
        }
        float z = 0.0;
        for (uint i = 0; i < keep; ++i) z += exp((cl[i] - mx) / temp);
        float target = u * z, cum = 0.0;
        uint pick = keep - 1u;
        for (uint i = 0; i < keep; ++i) {
            cum += exp((cl[i] - mx) / temp);
            if (target < cum) {
                pick = i;
                break;
            }
        }
        tok[words + p.out_idx] = nan_seen != 0u ? 0xffffffffu : ci[pick];
    }
}
