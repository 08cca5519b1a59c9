// x rounded to signed bytes in blocks of 16 values (gemv.comp, top), for the shaders that round
// it and meet it in integer dot products (gemv.comp, gemv_tile.comp; GL_EXT_integer_dot_product).

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

// Four packed signed bytes of weights (or offsets) against four of x.
int dot4(uint w, uint xw) { return dotPacked4x8EXT(int(w), int(xw)); }
