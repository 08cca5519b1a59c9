// gemv.comp over x rounded to signed bytes (X_INT8): the rounding into shared memory and the
// forms of x it reads, included inside #if defined(X_INT8).
//
// X_INT8 (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K on devices with integer dot products): each workgroup
// first rounds x to signed bytes with one scale per 16 values (largest magnitude -> 127) in
// shared memory, and the weight bytes meet x in 4-way packed integer dot products: one
// instruction where the float path spends about a dozen (unpack, convert, four FMAs) on four
// weights, which is what bounds the float path on a fast GPU. A 32-value slice is then two
// or three loads, the nibble masks, eight dot products and a few float scalings per row.
// The per-block sums of the rounded x stand in for sums of x (Q4_K / Q5_K mins, the Q4_0 and
// Q6_K offsets). The rounding is the activation quantization the CPU chain's dot products
// use, in blocks half as long (the CPU chain's are 32 values); the error it adds is a
// fraction of a percent of |x| per value. Four adjacent invocations round a block where
// subgroups allow (quantize_x_lanes), so the reads of x are contiguous. Blocks of 16 measured
// faster than blocks of 32 on an H200 (tg128 in one call: 9B 329 -> 339 t/s, Qwen3-8B
// 332-340 -> 352; docs/PERF.md 2026-12-01, afternoon).
//
// NORM_IN (X_INT8): x is the residual stream before its RMSNorm, the norm weights are binding
// 3, and each workgroup normalizes x as it rounds it, so the GEMV before needs no epilogue and
// no workgroup waits for all the others. The bytes are rounded from x · w (the rounding is
// blind to a common factor: 127 / max |x · w| · x · w is the same for x · s · w), the sum of
// squares of x is reduced at the rounding's barrier, and each row's sum is multiplied by
// 1 / sqrt(mean(x²) + eps) before it is stored.
//
// GATED_IN (X_INT8): x is a Gated DeltaNet layer's output before its gated RMSNorm, as the
// decode step left it (deltanet_step.comp NORM_OUT): x = o · w · silu(z), and the sum of
// squares of o of each group of a head's value columns at float gin_off of x's binding
// ([head][GIN_G]). A 16-value block lies in one head; its rounding is blind to the head's
// factor 1 / sqrt(mean(o²) + eps), so the factor scales the block's scale and scaled sum.
//
// XPRE: x_off points at x rounded by the GEMV that wrote it (gemv_epilogue.glsl, ROUND_OUT), so
// the GEMV has no rounding pass.

// x rounded to signed bytes (see the top) in blocks of 16 values: block e (values 16e ..
// 16e + 15) is xq[e], four values a word, with xd[e] = (its scale, scale · the sum of its
// rounded values). Each 16-value run a slice meets has its own scale.
shared uvec4 xq[2u * XBLOCKS];
shared vec2 xd[2u * XBLOCKS];
#if defined(NORM_IN)
// Partial sums of squares of x, one a subgroup (SUBGROUP; else reduced into xss[0]). Read where
// the rows are stored rather than held in a register across the row loop: one register more put
// the FFN pair's variant past 64, and its workgroups from two a multiprocessor to one.
shared float xss[WG];

// The factor of every row's sum, 1 / sqrt(mean(x²) + eps) (rms_norm.comp's formula).
float norm_in_scale() {
    if ((ABLATE & 5u) != 0u) return 1.0;  // the ablations leave the sums unwritten
#if defined(SUBGROUP)
    float total = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; ++i) total += xss[i];
#else
    float total = xss[0];
#endif
    return inversesqrt(total / float(p.ncols) + NORM_EPS);
}
#endif

#if defined(GATED_IN)
// The gated norm's factor of the head that 16-value block e of x lies in (see the top).
float gin_factor(uint e) {
    uint h = 16u * e / GIN_DV;
    float ss = 0.0;
    for (uint g = 0; g < GIN_G; ++g) ss += x[p.gin_off + h * GIN_G + g];
    return inversesqrt(ss / float(GIN_DV) + NORM_EPS);
}
#endif

#if defined(SUBGROUP)
#define ROUND_LANES  // quantize_x_lanes
#endif
#include "round_bytes.glsl"

#if defined(SUBGROUP)
// quantize_x where subgroups hold 4+ invocations: four adjacent ones round a block, four values
// each, their largest magnitude and sums combined by shuffles. The workgroup's reads of x (and
// of the norm weights) are then contiguous 16-byte loads, a few cache lines an instruction;
// with a thread a block, each load instruction of a subgroup of 32 touched 32 lines. On an
// H200 the Qwen3.5-9B token went 3213 -> 3089 us (projection stage 692 -> 627).
void quantize_x_lanes() {
    uint lane = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#if defined(NORM_IN)
    float ss = 0.0;
#endif
    // Value quad i is values 4i .. 4i + 3: quad j = i % 4 of block i / 4.
    for (uint i = lane; i < 8u * XBLOCKS; i += WG) {
        vec4 v = xload4(4u * i);
#if defined(GATED_IN)
        float gf = gin_factor(i >> 2);
#endif
#if defined(NORM_IN)
        ss += dot(v, v);
        v *= nin_w4[i];
#endif
        float d;
        int sum;
        uint e = i >> 2, j = i & 3u;
        xq[e][j] = round_quad_lanes(v, d, sum);
#if defined(GATED_IN)
        d *= gf;
#endif
        if (j == 0u) xd[e] = vec2(d, d * float(sum));
    }
#if defined(NORM_IN)
    ss = subgroupAdd(ss);
    if (subgroupElect()) xss[gl_SubgroupID] = ss;
#endif
    barrier();
}
#endif

void quantize_x() {
    if ((ABLATE & 4u) != 0u) return;
    if (XPRE != 0u) return;  // x is rounded already
    if ((ABLATE & 1u) != 0u) {
        for (uint e = gl_LocalInvocationID.x; e < 2u * XBLOCKS; e += WG) {
            xq[e] = uvec4(0x01010101u);
            xd[e] = vec2(1.0, 16.0);
        }
        barrier();
        return;
    }
#if defined(SUBGROUP)
    if (gl_SubgroupSize >= 4u) {
        quantize_x_lanes();
        return;
    }
#endif
#if defined(NORM_IN)
    float ss = 0.0;  // this thread's sum of squares of x
#endif
    for (uint e = gl_LocalInvocationID.x; e < 2u * XBLOCKS; e += WG) {
        vec4 v[4];
        [[unroll]] for (uint i = 0; i < 4u; ++i) {
            v[i] = xload4(16u * e + 4u * i);
#if defined(NORM_IN)
            ss += dot(v[i], v[i]);
            v[i] *= nin_w4[4u * e + i];
#endif
        }
        float d;
        int s0;
        xq[e] = round16(v, d, s0);
#if defined(GATED_IN)
        d *= gin_factor(e);
#endif
        xd[e] = vec2(d, d * float(s0));
    }
#if defined(NORM_IN)
    uint tid = gl_LocalInvocationID.x;
#if defined(SUBGROUP)
    ss = subgroupAdd(ss);
    if (subgroupElect()) xss[gl_SubgroupID] = ss;
    barrier();
#else
    xss[tid] = ss;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) xss[tid] += xss[tid + s];
        barrier();
    }
#endif
#else
    barrier();
#endif
}

// Block e of the rounded x (its bytes; its scale and scaled sum): from shared memory, or under
// XPRE from the rounding the GEMV before wrote (see the top).
uvec4 xq_at(uint e) { return XPRE != 0u ? gxq4[(p.x_off >> 2) + e] : xq[e]; }
vec2 xd_at(uint e) { return XPRE != 0u ? gxd2[((p.x_off + p.ncols / 4u) >> 1) + e] : xd[e]; }

#include "x_slice.glsl"
