// The rounded x values (round_bytes.glsl's blocks of 16) that a weight slice of each block
// format meets, for the GEMVs over x rounded to bytes: gemv.comp (gemv_x_bytes.glsl) and
// gemv_batch.comp (X_INT8). The includer defines xq_at(e) and xd_at(e) (block e's bytes; its
// scale and scaled sum), ABLATE and WIDE.

// The 32 rounded x values a slice meets, two 16-value blocks (a: the first, b: the other, in the
// order the slice's weight words meet them), with f = (a's scale, b's, a's scaled sum, b's). A
// WIDE slice meets four: a, a2 (the 32 values of one run) and b, b2, with f their four scales and
// g their four scaled sums.
struct XSlice {
    uvec4 a, b, a2, b2;
    vec4 f, g;
};

XSlice x_slice(uint blk, uint part) {
    XSlice x;
    if ((ABLATE & 4u) != 0u) {
        x.a = x.b = x.a2 = x.b2 = uvec4(0x01010101u);
        x.f = vec4(1.0, 1.0, 16.0, 16.0);
        x.g = vec4(16.0);
        return x;
    }
    // Indices below are of 32-value runs (bi, bj); run b holds 16-value blocks 2b and 2b + 1.
#if defined(WTYPE_Q4_K) || defined(WTYPE_Q6_K)
    if (WIDE != 0u) {
        // Q4_K: sub-blocks 2·part and 2·part + 1; Q6_K: quarters c and c + 2 of half h (part =
        // 2h + c). All 32 values of each.
#if defined(WTYPE_Q6_K)
        uint bi = blk * 8u + 4u * (part >> 1) + (part & 1u), bj = bi + 2u;
#else
        uint bi = blk * 8u + 2u * part, bj = bi + 1u;
#endif
        x.a = xq_at(2u * bi);
        x.a2 = xq_at(2u * bi + 1u);
        x.b = xq_at(2u * bj);
        x.b2 = xq_at(2u * bj + 1u);
        vec2 da = xd_at(2u * bi), da2 = xd_at(2u * bi + 1u);
        vec2 db = xd_at(2u * bj), db2 = xd_at(2u * bj + 1u);
        x.f = vec4(da.x, da2.x, db.x, db2.x);
        x.g = vec4(da.y, da2.y, db.y, db2.y);
        return x;
    }
#endif
#if defined(WTYPE_Q4_K) || defined(WTYPE_Q5_K) || defined(WTYPE_Q6_K)
    // Q4_K / Q5_K: sub-blocks 2j and 2j+1 (j = part/2); Q6_K: quarters c and c + 2 of half h
    // (part = 4h + 2c + f). Values 16f .. 16f + 15 of each (f = part&1).
    uint f = part & 1u;
#if defined(WTYPE_Q6_K)
    uint bi = blk * 8u + (part & 4u) + ((part >> 1) & 1u), bj = bi + 2u;
#else
    uint bi = blk * 8u + (part & 6u), bj = bi + 1u;
#endif
    x.a = xq_at(2u * bi + f);
    x.b = xq_at(2u * bj + f);
    vec2 da = xd_at(2u * bi + f), db = xd_at(2u * bj + f);
#else  // Q4_0, Q8_0: the block's 32 values
    x.a = xq_at(2u * blk);
    x.b = xq_at(2u * blk + 1u);
    vec2 da = xd_at(2u * blk), db = xd_at(2u * blk + 1u);
#endif
    x.f = vec4(da.x, db.x, da.y, db.y);
    return x;
}
