// The first pass of choosing the next token over a large vocabulary (see sample.comp): one
// workgroup per chunk of CHUNK logits keeps the chunk's candidates, so the one workgroup of the
// second pass reads a few thousand of them instead of every logit (a 248k vocabulary made one
// workgroup stream a megabyte per pass, 33 passes for top-k).
// Chunk c keeps its kc = min(top_k, CHUNK) best logits (1 for greedy) in the order the host
// sampler ranks them (logit descending, index ascending among equals): every logit above the
// kc-th largest and, of those equal to it, the lowest indices. The global top-k by that order is
// then a subset of the union of the chunks' candidates. They go to cand[c·kc ..] as (logit,
// index) pairs; slots past the chunk's last logit get the index 0xffffffff (none). A chunk with a
// NaN keeps only that NaN, so that the second pass sees it and gives no token.
// Workgroup y is a batch's row: its words at tok[y · tok_row], its logits y · l_row on, its
// candidates y · cand_row pairs on.
#version 450
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;      // threads, a power of two
layout(constant_id = 1) const uint CHUNK = 4096;  // logits a workgroup, a multiple of WG

layout(std430, binding = 0) readonly buffer Logits { float lg[]; };
layout(std430, binding = 1) readonly buffer Tok { uint tok[]; };
layout(std430, binding = 2) writeonly buffer Cand { uvec2 cand[]; };

layout(push_constant) uniform Push {
    uint n;      // vocabulary
    uint l_off;  // first logit
    uint par;    // tok[par ..]: temperature, top_k (as in sample.comp)
    uint tok_row, l_row, cand_row;  // a batch's rows (workgroup y): words, logits, pairs
} p;

const uint PER = CHUNK / WG;  // logits a thread, contiguous so that scans follow index order
shared float sv[CHUNK];
shared uint red_a[WG], red_b[WG];
shared uint nan_seen;
shared float best_v[WG];
shared uint best_i[WG];
#include "best_of.glsl"

uint key(float f) {
    uint b = floatBitsToUint(f);
    return (b & 0x80000000u) != 0u ? ~b : (b | 0x80000000u);
}

shared uint kth_hist[256], kth_tmp[256], kth_sel[2];
bool kth_key_of(uint i, out uint kv) {
    kv = key(sv[i]);
    return true;
}
#include "kth_key.glsl"

void main() {
    const uint t = gl_LocalInvocationID.x, c = gl_WorkGroupID.x, base = c * CHUNK;
    const uint row = gl_WorkGroupID.y, words = row * p.tok_row, l0 = p.l_off + row * p.l_row;
    const uint k = uintBitsToFloat(tok[words + p.par]) <= 0.0 ? 1u : tok[words + p.par + 1u];
    const uint kc = min(k, CHUNK);
    const uint c0 = row * p.cand_row + c * kc;  // this chunk's first candidate slot
    const uint valid = min(CHUNK, p.n - base);  // the grid has no chunk past n
    const uint keff = min(kc, valid);
    [[unroll]] for (uint j = 0; j < PER; ++j) {
        uint i = t * PER + j;
        sv[i] = i < valid ? lg[l0 + base + i] : 0.0;
    }
    if (t == 0u) nan_seen = 0u;
    barrier();
    [[unroll]] for (uint j = 0; j < PER; ++j)
        if ((floatBitsToUint(sv[t * PER + j]) & 0x7fffffffu) > 0x7f800000u) atomicOr(nan_seen, 1u);
    barrier();
    if (nan_seen != 0u) {
        for (uint s = t; s < kc; s += WG)
            cand[c0 + s] = s == 0u ? uvec2(0x7fc00000u, base) : uvec2(0u, 0xffffffffu);
        return;
    }

    if (keff == 1u) {  // greedy or top_k 1: the chunk's largest logit, the first among equals
        float best = sv[t * PER];
        uint bi = t * PER;
        [[unroll]] for (uint j = 1; j < PER; ++j) {
            uint i = t * PER + j;
            if (i < valid && sv[i] > best) {
                best = sv[i];
                bi = i;
            }
        }
        best_of(best, t * PER < valid ? bi : 0xffffffffu);
        if (t == 0u) cand[c0] = uvec2(floatBitsToUint(best_v[0]), base + best_i[0]);
        for (uint s = 1u + t; s < kc; s += WG) cand[c0 + s] = uvec2(0u, 0xffffffffu);
        return;
    }

    // The key of the keff-th largest logit.
    const uint prefix = kth_largest_key(valid, keff);

    // This thread's logits above the threshold and equal to it, and inclusive scans of both
    // over the threads (Hillis-Steele), which run in index order.
    uint gt = 0u, eq = 0u;
    [[unroll]] for (uint j = 0; j < PER; ++j) {
        uint i = t * PER + j;
        if (i < valid) {
            uint kv = key(sv[i]);
            gt += kv > prefix ? 1u : 0u;
            eq += kv == prefix ? 1u : 0u;
        }
    }
    red_a[t] = gt;
    red_b[t] = eq;
    barrier();
    for (uint s = 1u; s < WG; s <<= 1) {
        uint a = t >= s ? red_a[t - s] : 0u, b = t >= s ? red_b[t - s] : 0u;
        barrier();
        red_a[t] += a;
        red_b[t] += b;
        barrier();
    }
    const uint total_gt = red_a[WG - 1u];  // fewer than keff by the threshold's choice
    uint at_gt = red_a[t] - gt, at_eq = red_b[t] - eq;
    const uint first = c0;
    [[unroll]] for (uint j = 0; j < PER; ++j) {
        uint i = t * PER + j;
        if (i >= valid) continue;
        float v = sv[i];
        uint kv = key(v);
        if (kv > prefix) {
            cand[first + at_gt] = uvec2(floatBitsToUint(v), base + i);
            ++at_gt;
        } else if (kv == prefix) {
            if (total_gt + at_eq < keff) cand[first + total_gt + at_eq] = uvec2(floatBitsToUint(v), base + i);
            ++at_eq;
        }
    }
    for (uint s = keff + t; s < kc; s += WG) cand[first + s] = uvec2(0u, 0xffffffffu);
}
