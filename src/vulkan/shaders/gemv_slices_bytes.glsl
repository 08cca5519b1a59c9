// gemv.comp's slice products over x rounded to signed bytes (gemv_x_bytes.glsl): slice_dot_i8()
// of a slice of each block format in 4-way packed integer dot products, included inside
// #if defined(X_INT8).
//
// A slice of 32 weights is, in every format, two words-of-bytes vectors a and b (the values
// meeting x's blocks a and b, XSlice) and four float terms c (slice_words()), and its product
// with x is c.x·f.x·(a·x.a) + c.y·f.y·(b·x.b) - c.z·f.z - c.w·f.w (words_dot()): the format's
// offsets and mins go through the scaled sums of x's blocks. gemv_batch.comp prepares a row's
// slice once and meets it with every vector of its group.
//
// Wide slices (WIDE, X_INT8 Q4_K and Q6_K): a slice of 64 weights, so the fixed work of a
// slice (the header or scale loads, unpacking the scales, the float terms) is paid once for
// twice the weights; the launcher gives a thread half the rows, so it holds as many weight
// bytes. On an H200 these GEMVs were bound by that work a slice, not by the bytes: a Q4_K
// GEMV over 65536 rows took 65.5 -> 51.5 us (2.3 -> 2.9 TB/s).

float words_dot(uvec4 a, uvec4 b, vec4 c, XSlice x) {
    int lo = 0, hi = 0;
    [[unroll]] for (uint i = 0; i < 4u; ++i) {
        lo += dot4(a[i], x.a[i]);
        hi += dot4(b[i], x.b[i]);
    }
    return c.x * x.f.x * float(lo) + c.y * x.f.y * float(hi) - c.z * x.f.z - c.w * x.f.w;
}

#if defined(WTYPE_Q4_K)
void slice_words(uint rb, uint blk, uint part, out uvec4 a, out uvec4 b, out vec4 c) {
    uvec4 hd = load16(tiled_byte(rb, blk, 144u, 0u));
    uvec4 q = load16(tiled_byte(rb, blk, 144u, 16u + 16u * part));
    vec2 sc, mn;
    k4_pair(hd, part >> 1, sc, mn);
    a = q & 0x0f0f0f0fu;
    b = (q >> 4) & 0x0f0f0f0fu;
    vec2 dm = unpackHalf2x16(hd.x);
    c = vec4(dm.x * sc, dm.y * mn);
}
float slice_dot_i8(uint rb, uint blk, uint part, XSlice x) {
    if (WIDE != 0u) {
        uvec4 hd = load16(tiled_byte(rb, blk, 144u, 0u));
        vec2 sc, mn;
        int lo = 0, hi = 0;
        // Bytes 32·part .. +31 of the nibbles: sub-block 2·part (low) and 2·part + 1 (high).
        uvec4 q0 = load16(tiled_byte(rb, blk, 144u, 16u + 32u * part));
        uvec4 q1 = load16(tiled_byte(rb, blk, 144u, 32u + 32u * part));
        k4_pair(hd, part, sc, mn);
        int lo2 = 0, hi2 = 0;
        [[unroll]] for (uint i = 0; i < 4u; ++i) {
            lo += dot4(q0[i] & 0x0f0f0f0fu, x.a[i]);
            lo2 += dot4(q1[i] & 0x0f0f0f0fu, x.a2[i]);
            hi += dot4((q0[i] >> 4) & 0x0f0f0f0fu, x.b[i]);
            hi2 += dot4((q1[i] >> 4) & 0x0f0f0f0fu, x.b2[i]);
        }
        vec2 dm = unpackHalf2x16(hd.x);
        return dm.x * (sc.x * (x.f.x * float(lo) + x.f.y * float(lo2)) +
                       sc.y * (x.f.z * float(hi) + x.f.w * float(hi2))) -
               dm.y * dot(mn, vec2(x.g.x + x.g.y, x.g.z + x.g.w));
    }
    uvec4 a, b;
    vec4 c;
    slice_words(rb, blk, part, a, b, c);
    return words_dot(a, b, c, x);
}
#elif defined(WTYPE_Q5_K)
void slice_words(uint rb, uint blk, uint part, out uvec4 a, out uvec4 b, out vec4 c) {
    uvec4 hd, qh, q;
    q5_slice(rb, blk, part, hd, qh, q);
    uint j = part >> 1;
    vec2 sc, mn;
    k4_pair(hd, j, sc, mn);
    a = (q & 0x0f0f0f0fu) | (((qh >> (2u * j)) & 0x01010101u) << 4);
    b = ((q >> 4) & 0x0f0f0f0fu) | (((qh >> (2u * j + 1u)) & 0x01010101u) << 4);
    vec2 dm = unpackHalf2x16(hd.x);
    c = vec4(dm.x * sc, dm.y * mn);
}
float slice_dot_i8(uint rb, uint blk, uint part, XSlice x) {
    uvec4 a, b;
    vec4 c;
    slice_words(rb, blk, part, a, b, c);
    return words_dot(a, b, c, x);
}
#elif defined(WTYPE_Q6_K)
// WIDE slice part = 2h + c of block blk (see q6_slice): bytes 32c .. 32c + 31 of the half's low
// nibbles and all 32 bytes of its high bits. v: quarter c's values 0-15, 16-31, then quarter
// c + 2's; sc their four scales.
void q6_slice_wide(uint rb, uint blk, uint part, out uvec4 v[4], out vec4 sc, out float d) {
    uint h = part >> 1, c = part & 1u;
    uvec4 ql0 = load16(tiled_byte(rb, blk, 210u, 32u * part));
    uvec4 ql1 = load16(tiled_byte(rb, blk, 210u, 32u * part + 16u));
    uvec4 qh0 = load16(tiled_byte(rb, blk, 210u, 128u + 32u * h));
    uvec4 qh1 = load16(tiled_byte(rb, blk, 210u, 144u + 32u * h));
    uint o_sc = tiled_byte(rb, blk, 210u, 192u + 8u * h);
    uvec2 s = uvec2(wq[o_sc >> 2], wq[(o_sc >> 2) + 1u]);
    d = w_f16(tiled_byte(rb, blk, 210u, 208u));
    v[0] = (ql0 & 0x0f0f0f0fu) | (((qh0 >> (2u * c)) & 0x03030303u) << 4);
    v[1] = (ql1 & 0x0f0f0f0fu) | (((qh1 >> (2u * c)) & 0x03030303u) << 4);
    v[2] = ((ql0 >> 4) & 0x0f0f0f0fu) | (((qh0 >> (2u * c + 4u)) & 0x03030303u) << 4);
    v[3] = ((ql1 >> 4) & 0x0f0f0f0fu) | (((qh1 >> (2u * c + 4u)) & 0x03030303u) << 4);
    // Scales 8h + 2c + f (word s.x) and 8h + 2(c + 2) + f (s.y): bytes 2c and 2c + 1.
    int sh = int(16u * c);
    sc = vec4(bitfieldExtract(int(s.x), sh, 8), bitfieldExtract(int(s.x), sh + 8, 8),
              bitfieldExtract(int(s.y), sh, 8), bitfieldExtract(int(s.y), sh + 8, 8));
}

void slice_words(uint rb, uint blk, uint part, out uvec4 a, out uvec4 b, out vec4 c) {
    uvec4 v[2];
    vec2 sc;
    float d;
    q6_slice(rb, blk, part, v, sc, d);
    a = v[0];
    b = v[1];
    c = vec4(d * sc, 32.0 * d * sc);  // the -32 of every value through the sums of x's blocks
}
float slice_dot_i8(uint rb, uint blk, uint part, XSlice x) {
    if (WIDE != 0u) {
        uvec4 v[4];
        vec4 sc;
        float d;
        q6_slice_wide(rb, blk, part, v, sc, d);
        int l0 = 0, l1 = 0, h0 = 0, h1 = 0;
        [[unroll]] for (uint i = 0; i < 4u; ++i) {
            l0 += dot4(v[0][i], x.a[i]);
            l1 += dot4(v[1][i], x.a2[i]);
            h0 += dot4(v[2][i], x.b[i]);
            h1 += dot4(v[3][i], x.b2[i]);
        }
        vec4 dots = vec4(x.f.x * float(l0), x.f.y * float(l1), x.f.z * float(h0), x.f.w * float(h1));
        return d * dot(sc, dots - 32.0 * x.g);
    }
    uvec4 a, b;
    vec4 c;
    slice_words(rb, blk, part, a, b, c);
    return words_dot(a, b, c, x);
}
#elif defined(WTYPE_Q8_0)
void slice_words(uint rb, uint blk, uint part, out uvec4 a, out uvec4 b, out vec4 c) {
    uint o = rb + blk * 34u;
    a = load16_a2(o + 2u);
    b = load16_a2(o + 18u);
    float d = w_f16(o);
    c = vec4(d, d, 0.0, 0.0);
}
#elif defined(WTYPE_Q4_0)
void slice_words(uint rb, uint blk, uint part, out uvec4 a, out uvec4 b, out vec4 c) {
    uint o = rb + blk * 18u;
    uvec4 q = load16_a2(o + 2u);
    a = q & 0x0f0f0f0fu;
    b = (q >> 4) & 0x0f0f0f0fu;
    float d = w_f16(o);
    c = vec4(d, d, 8.0 * d, 8.0 * d);  // the -8 of every value
}
#endif
#if defined(WTYPE_Q8_0) || defined(WTYPE_Q4_0)
float slice_dot_i8(uint rb, uint blk, uint part, XSlice x) {
    uvec4 a, b;
    vec4 c;
    slice_words(rb, blk, part, a, b, c);
    return words_dot(a, b, c, x);
}
#endif
