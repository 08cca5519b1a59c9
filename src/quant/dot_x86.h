// What the x86 dot-product kernels share (dot_avx2.cpp, dot_avx512.cpp): horizontal sums, the
// 32-element blocks' decoders, Q6_K's high bits, and the dispatch over column counts. GCC inlines
// intrinsics only into functions compiled for their features, so each kernel file includes this
// inside its own unnamed namespace with DL_TARGET set to its target attribute.
//
// Not a header of its own: no include guard, for it is meant to be included once a file.
#if !defined(DL_TARGET)
#error "define DL_TARGET (the kernels' target attribute) before including quant/dot_x86.h"
#endif

DL_TARGET inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

DL_TARGET inline float f16(uint16_t h) {
    return _cvtsh_ss(h);
}

DL_TARGET inline const char* col(const void* x, size_t stride, int c) {
    return static_cast<const char*>(x) + (size_t)c * stride;
}

DL_TARGET inline __m256i load(const void* p) {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// ---- 32-element blocks against Q8_0 ----

DL_TARGET inline __m256i unpack_nibbles(const uint8_t* qs) {
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    __m128i m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

// Decoders: one 32-element weight block to 32 signed bytes.
struct DecodeQ8_0 {
    using Block = block_q8_0;
    DL_TARGET static __m256i run(const Block& b) { return load(b.qs); }
};
struct DecodeQ4_0 {
    using Block = block_q4_0;
    DL_TARGET static __m256i run(const Block& b) {
        return _mm256_sub_epi8(unpack_nibbles(b.qs), _mm256_set1_epi8(8));
    }
};
struct DecodeIQ4_NL {
    using Block = block_iq4_nl;
    DL_TARGET static __m256i run(const Block& b) {
        const __m256i table = _mm256_broadcastsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues)));
        return _mm256_shuffle_epi8(table, unpack_nibbles(b.qs));
    }
};

// Q6_K: bits shift..shift+1 of every byte of hb, moved to bits 4..5.
DL_TARGET inline __m256i q6_high(__m256i hb, int shift) {
    const __m256i low2 = _mm256_set1_epi8(3);
    return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, shift), low2), 4);
}

// Fixed column counts let the compiler keep every accumulator in a register.
template <template <int> class K>
void dispatch_cols(const void* w, const void* x, size_t xs, int ncols, float* out, int64_t n) {
    switch (ncols) {
        case 1:
            return K<1>::run(w, x, xs, out, n);
        case 2:
            return K<2>::run(w, x, xs, out, n);
        case 3:
            return K<3>::run(w, x, xs, out, n);
        default:
            return K<4>::run(w, x, xs, out, n);
    }
}

// K<NC>::run(...) calls fn with NC columns.
#define DL_KERNEL(name, fn)                                                               \
    template <int NC>                                                                     \
    struct name {                                                                         \
        static void run(const void* w, const void* x, size_t xs, float* out, int64_t n) { \
            fn(w, x, xs, out, n);                                                         \
        }                                                                                 \
    };
