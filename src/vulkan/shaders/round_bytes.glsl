// x rounded to signed bytes in blocks of 16 values (gemv_x_bytes.glsl, top), for the shaders
// that round it (gemv.comp, gemv_tile.comp, deltanet_step.comp, attn_decode.comp) and meet it in
// integer dot products (the GEMVs: GL_EXT_integer_dot_product; a shader that only rounds defines
// ROUND_ONLY first).

// Four values of x rounded by the factor id (127 over the largest magnitude of their block, 0
// for a block of zeros): the signed bytes packed in a word, and their sum.
uint round4(vec4 v, float id, out int sum) {
    ivec4 q = ivec4(roundEven(v * id));
    sum = q.x + q.y + q.z + q.w;
    return (uint(q.x) & 0xffu) | ((uint(q.y) & 0xffu) << 8) | ((uint(q.z) & 0xffu) << 16) |
           (uint(q.w) << 24);
}

// A block's rounding factor from its largest magnitude. A non-finite value makes the block's
// scale NaN, so every row it meets is NaN, as with the float path (the rounded bytes themselves
// are then meaningless).
float round_factor(inout float amax, bool finite) {
    if (!finite) amax = uintBitsToFloat(0x7fc00000u);
    return finite && amax > 0.0 ? 127.0 / amax : 0.0;
}

// A block of 16 values (four quads) rounded: its bytes in four words, its scale d (its largest
// magnitude / 127; NaN where a value is not finite) and the sum of its bytes.
uvec4 round16(vec4 v[4], out float d, out int sum) {
    float amax = 0.0;
    bool finite = true;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        vec4 a = abs(v[i]);
        amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
        finite = finite && !any(isnan(v[i])) && !any(isinf(v[i]));
    }
    float id = round_factor(amax, finite);
    uvec4 w;
    sum = 0;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        int s;
        w[i] = round4(v[i], id, s);
        sum += s;
    }
    d = amax / 127.0;
    return w;
}

#if defined(ROUND_TO_ACT)
// Block e of a rounding of n values at act[off ..] (the includer's float and word views of its
// binding, act and act_u; gemv.comp XPRE's layout): the 16 values v rounded, their four words of
// bytes at off + 4e, the scale and scaled sum at off + n / 4 + 2e.
void store_rounded_block(vec4 v[4], uint off, uint n, uint e) {
    float d;
    int sum;
    uvec4 w = round16(v, d, sum);
    [[unroll]] for (uint i = 0u; i < 4u; ++i) act_u[off + 4u * e + i] = w[i];
    act[off + n / 4u + 2u * e] = d;
    act[off + n / 4u + 2u * e + 1u] = d * float(sum);
}
#endif

#if defined(ROUND_LANES)
// A quad of a 16-value block rounded by the four adjacent invocations of a subgroup that hold the
// block's four quads (GL_KHR_shader_subgroup_shuffle; the includer defines ROUND_LANES): their
// largest magnitude and sums combined by shuffles. Returns this quad's word of bytes; d and sum
// are the block's (as round16's), the same in all four.
uint round_quad_lanes(vec4 v, out float d, out int sum) {
    vec4 a = abs(v);
    float amax = max(max(a.x, a.y), max(a.z, a.w));
    uint bad = any(isnan(v)) || any(isinf(v)) ? 1u : 0u;
    [[unroll]] for (uint m = 1u; m < 4u; m <<= 1) {
        amax = max(amax, subgroupShuffleXor(amax, m));
        bad |= subgroupShuffleXor(bad, m);
    }
    float id = round_factor(amax, bad == 0u);
    uint w = round4(v, id, sum);
    sum += subgroupShuffleXor(sum, 1u);
    sum += subgroupShuffleXor(sum, 2u);
    d = amax / 127.0;
    return w;
}
#endif

#if !defined(ROUND_ONLY)
// Four packed signed bytes of weights (or offsets) against four of x.
int dot4(uint w, uint xw) { return dotPacked4x8EXT(int(w), int(xw)); }
#endif
