// Where the runs of Q6_K block i lie in a row of nb blocks as the device holds it, laid out by
// field (weight_layout.h): byte offsets from the row's first byte of its 128 bytes of low
// nibbles ql (.x), its 64 bytes of 2-bit highs qh (.y), its 16 signed scales (.z) and its f16 d
// (.w). Every Q6_K reader (blocks.glsl, gemv.comp, gemm_cm2.comp) finds the runs here.
uvec4 q6_runs(uint nb, uint i) {
    return uvec4(128u * i, 128u * nb + 64u * i, 192u * nb + 16u * i, 208u * nb + 2u * i);
}
