// Q4_K / Q5_K block headers, for the shaders that read them from 16-byte words (gemv.comp,
// gemv_tile.comp).

// Scale and min of sub-blocks 2j and 2j+1 (j = part/2) from the 12 scale bytes in words s.yzw
// of the block header: 6-bit values, the upper four packed with their top bits in bytes 0-7.
void k4_pair(uvec4 s, uint j, out vec2 sc, out vec2 mn) {
    uint sh = 8u * ((2u * j) & 3u);
    uint a = s.y >> sh, b = s.z >> sh, c = s.w >> sh;
    if (j < 2u) {
        sc = vec2(uvec2(a, a >> 8) & 63u);
        mn = vec2(uvec2(b, b >> 8) & 63u);
    } else {
        sc = vec2((uvec2(c, c >> 8) & 0xfu) | (uvec2(a >> 2, a >> 10) & 0x30u));
        mn = vec2((uvec2(c >> 4, c >> 12) & 0xfu) | (uvec2(b >> 2, b >> 10) & 0x30u));
    }
}
