// AVX2/FMA/F16C dot products for the common weight formats, compiled for those features whatever
// the build flags and only called after a run-time CPU check (dot.cpp). Each kernel takes one
// weight row and up to 4 activation rows: the weight block is decoded once into registers and
// multiplied into every column, which is what makes prefill (many tokens) cheaper than decode.
// Integer sums inside a block are exact, so results match the scalar reference up to float
// summation order.
#include "quant/kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "core/half.h"
#include "quant/blocks.h"

#define DL_AVX2 __attribute__((target("avx2,fma,f16c")))
#define DL_TARGET DL_AVX2

namespace dl::quant::kernels {

namespace {

#include "quant/dot_x86.h"

// Sum of signed bytes a[i] * b[i] in 8 int32 lanes (|a|, |b| <= 127 so the pairwise int16 sums of
// maddubs cannot saturate).
DL_AVX2 inline __m256i dot_i8(__m256i a, __m256i b) {
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// Unsigned bytes u (0..63) times signed bytes b, pairwise int16 sums (no saturation for u <= 63).
DL_AVX2 inline __m256i mul_u8_i8(__m256i u, __m256i b) {
    return _mm256_maddubs_epi16(u, b);
}

// ---- float weights (activations F32) ----

template <int NC>
DL_AVX2 void f32_cols(const void* w, const void* x, size_t xs, float* out, int64_t n) {
    const float* a = static_cast<const float*>(w);
    __m256 acc[NC][2];
    for (int c = 0; c < NC; ++c) acc[c][0] = acc[c][1] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 w0 = _mm256_loadu_ps(a + i), w1 = _mm256_loadu_ps(a + i + 8);
        for (int c = 0; c < NC; ++c) {
            const float* b = reinterpret_cast<const float*>(col(x, xs, c));
            acc[c][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(b + i), acc[c][0]);
            acc[c][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(b + i + 8), acc[c][1]);
        }
    }
    for (int c = 0; c < NC; ++c) {
        const float* b = reinterpret_cast<const float*>(col(x, xs, c));
        float s = hsum(_mm256_add_ps(acc[c][0], acc[c][1]));
        for (int64_t j = i; j < n; ++j) s += a[j] * b[j];
        out[c] = s;
    }
}

// 8 fp16 or bf16 values widened to float.
template <bool kBF16>
DL_AVX2 inline __m256 load_half(const uint16_t* p) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (kBF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    else
        return _mm256_cvtph_ps(h);
}

template <int NC, bool kBF16>
DL_AVX2 void half_cols(const void* w, const void* x, size_t xs, float* out, int64_t n) {
    const uint16_t* a = static_cast<const uint16_t*>(w);
    __m256 acc[NC][2];
    for (int c = 0; c < NC; ++c) acc[c][0] = acc[c][1] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 w0 = load_half<kBF16>(a + i), w1 = load_half<kBF16>(a + i + 8);
        for (int c = 0; c < NC; ++c) {
            const float* b = reinterpret_cast<const float*>(col(x, xs, c));
            acc[c][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(b + i), acc[c][0]);
            acc[c][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(b + i + 8), acc[c][1]);
        }
    }
    for (int c = 0; c < NC; ++c) {
        const float* b = reinterpret_cast<const float*>(col(x, xs, c));
        float s = hsum(_mm256_add_ps(acc[c][0], acc[c][1]));
        for (int64_t j = i; j < n; ++j) s += (kBF16 ? bf16_to_f32(a[j]) : f16(a[j])) * b[j];
        out[c] = s;
    }
}

// ---- 32-element blocks against Q8_0 ----

template <int NC, typename Decode>
DL_AVX2 void q8_0_family_cols(const void* w, const void* x, size_t xs, float* out, int64_t n) {
    using Block = typename Decode::Block;
    const Block* a = static_cast<const Block*>(w);
    __m256 acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; ++i) {
        __m256i q = Decode::run(a[i]);
        float dw = f16(a[i].d);
        for (int c = 0; c < NC; ++c) {
            const block_q8_0* b = reinterpret_cast<const block_q8_0*>(col(x, xs, c)) + i;
            __m256i s = dot_i8(q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs)));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dw * f16(b->d)), _mm256_cvtepi32_ps(s), acc[c]);
        }
    }
    for (int c = 0; c < NC; ++c) out[c] = hsum(acc[c]);
}

// ---- K-quants against Q8_K ----

// The 8 scales and mins of a Q4_K/Q5_K block as int16 lanes.
inline void scales_k4(const uint8_t* s, int16_t* sc, int16_t* m) {
    for (int j = 0; j < 8; ++j) {
        uint8_t a, b;
        get_scale_min_k4(j, s, &a, &b);
        sc[j] = a;
        m[j] = b;
    }
}

template <int NC, bool kHigh, typename Block>
DL_AVX2 void q45_K_cols(const void* w, const void* x, size_t xs, float* out, int64_t n) {
    const Block* a = static_cast<const Block*>(w);
    __m256 acc[NC];
    float mins[NC] = {};
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int16_t sc[8], m[8];
        scales_k4(a[i].scales, sc, m);
        const float d = f16(a[i].d), dmin = f16(a[i].dmin);
        __m256i hbits = _mm256_setzero_si256();
        if constexpr (kHigh) hbits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].qh));
        __m256i q[8];
        for (int k = 0; k < 4; ++k) {
            __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].qs + 32 * k));
            q[2 * k] = _mm256_and_si256(b, low4);
            q[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(b, 4), low4);
            if constexpr (kHigh) {
                const __m256i bit = _mm256_set1_epi8(1);
                __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * k), bit);
                __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * k + 1), bit);
                q[2 * k] = _mm256_or_si256(q[2 * k], _mm256_slli_epi16(h0, 4));
                q[2 * k + 1] = _mm256_or_si256(q[2 * k + 1], _mm256_slli_epi16(h1, 4));
            }
        }
        for (int c = 0; c < NC; ++c) {
            const block_q8_K* b = reinterpret_cast<const block_q8_K*>(col(x, xs, c)) + i;
            __m256i sum = _mm256_setzero_si256();
            for (int j = 0; j < 8; ++j) {
                __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * j));
                __m256i p = mul_u8_i8(q[j], y);
                sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, _mm256_set1_epi16(sc[j])));
            }
            int summ = 0;
            for (int j = 0; j < 8; ++j) summ += m[j] * (b->bsums[2 * j] + b->bsums[2 * j + 1]);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(b->d * d), _mm256_cvtepi32_ps(sum), acc[c]);
            mins[c] += b->d * dmin * (float)summ;
        }
    }
    for (int c = 0; c < NC; ++c) out[c] = hsum(acc[c]) - mins[c];
}

template <int NC>
DL_AVX2 void q6_K_cols(const void* w, const void* x, size_t xs, float* out, int64_t n) {
    const block_q6_K* a = static_cast<const block_q6_K*>(w);
    __m256 acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        __m256i q[8];    // unsigned 0..63, 32 elements each: half h, group k -> q[4h + k]
        __m256i scl[8];  // int16 scales matching q[...]: low lane sub-block 2k, high 2k+1
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = a[i].ql + 64 * h;
            __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
            __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
            __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].qh + 32 * h));
            q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l0, low4), q6_high(hb, 0));
            q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, low4), q6_high(hb, 2));
            q[4 * h + 2] =
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), q6_high(hb, 4));
            q[4 * h + 3] =
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4), q6_high(hb, 6));
            for (int k = 0; k < 4; ++k) {
                const int8_t* s = a[i].scales + 8 * h + 2 * k;
                scl[4 * h + k] = _mm256_set_m128i(_mm_set1_epi16(s[1]), _mm_set1_epi16(s[0]));
            }
        }
        const float d = f16(a[i].d);
        for (int c = 0; c < NC; ++c) {
            const block_q8_K* b = reinterpret_cast<const block_q8_K*>(col(x, xs, c)) + i;
            __m256i sum = _mm256_setzero_si256();
            for (int g = 0; g < 8; ++g) {
                __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs + 32 * g));
                sum = _mm256_add_epi32(sum, _mm256_madd_epi16(mul_u8_i8(q[g], y), scl[g]));
            }
            // every value carries +32: subtract 32 * sum(scale * bsum) once per block
            int off = 0;
            for (int sb = 0; sb < 16; ++sb) off += a[i].scales[sb] * b->bsums[sb];
            sum = _mm256_sub_epi32(sum, _mm256_setr_epi32(32 * off, 0, 0, 0, 0, 0, 0, 0));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(b->d * d), _mm256_cvtepi32_ps(sum), acc[c]);
        }
    }
    for (int c = 0; c < NC; ++c) out[c] = hsum(acc[c]);
}

// ---- activation quantizers (same arithmetic as quantize.cpp, so results are bit-identical) ----

DL_AVX2 inline float max_abs(const float* x, int n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8)
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

// 32 floats times id, rounded to nearest even and clamped to [-127, 127], as 32 int8.
DL_AVX2 inline __m256i round_32(const float* x, float id) {
    const __m256 s = _mm256_set1_ps(id);
    __m256i v[4];
    for (int k = 0; k < 4; ++k) {
        __m256i r = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), s));
        v[k] =
            _mm256_max_epi32(_mm256_min_epi32(r, _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
    }
    // packs interleave 128-bit lanes: restore element order with a dword permute
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

DL_AVX2 void quantize_q8_0(const float* x, void* dst, int64_t n) {
    block_q8_0* b = static_cast<block_q8_0*>(dst);
    for (int64_t i = 0; i < n / 32; ++i, x += 32) {
        float d = max_abs(x, 32) / 127;
        b[i].d = f32_to_f16(d);
        float id = d != 0 ? 1.0f / d : 0;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs), round_32(x, id));
    }
}

DL_AVX2 void quantize_q8_K(const float* x, void* dst, int64_t n) {
    block_q8_K* b = static_cast<block_q8_K*>(dst);
    for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
        float d = max_abs(x, QK_K) / 127;
        float id = d != 0 ? 1.0f / d : 0;
        b[i].d = d;
        for (int k = 0; k < 8; ++k) {
            __m256i q = round_32(x + 32 * k, id);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs + 32 * k), q);
            // sums of 16 bytes: widen to int16, add pairs down
            __m256i w0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q));
            __m256i w1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1));
            __m256i s0 = _mm256_madd_epi16(w0, _mm256_set1_epi16(1));
            __m256i s1 = _mm256_madd_epi16(w1, _mm256_set1_epi16(1));
            __m256i h = _mm256_hadd_epi32(s0, s1);
            h = _mm256_hadd_epi32(h, h);
            // per 128-bit half: [sum of 8 elements of the first 16, of the second 16, ...]
            int32_t t[8];
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(t), h);
            b[i].bsums[2 * k] = (int16_t)(t[0] + t[4]);
            b[i].bsums[2 * k + 1] = (int16_t)(t[1] + t[5]);
        }
    }
}

DL_KERNEL(KF32, f32_cols<NC>)
DL_KERNEL(KF16, (half_cols<NC, false>))
DL_KERNEL(KBF16, (half_cols<NC, true>))
DL_KERNEL(KQ8_0, (q8_0_family_cols<NC, DecodeQ8_0>))
DL_KERNEL(KQ4_0, (q8_0_family_cols<NC, DecodeQ4_0>))
DL_KERNEL(KIQ4_NL, (q8_0_family_cols<NC, DecodeIQ4_NL>))
DL_KERNEL(KQ4_K, (q45_K_cols<NC, false, block_q4_K>))
DL_KERNEL(KQ5_K, (q45_K_cols<NC, true, block_q5_K>))
DL_KERNEL(KQ6_K, q6_K_cols<NC>)
#undef DL_KERNEL

}  // namespace

DotColsFn avx2(QType t) {
    switch (t) {
        case QType::F32:
            return dispatch_cols<KF32>;
        case QType::F16:
            return dispatch_cols<KF16>;
        case QType::BF16:
            return dispatch_cols<KBF16>;
        case QType::Q8_0:
            return dispatch_cols<KQ8_0>;
        case QType::Q4_0:
            return dispatch_cols<KQ4_0>;
        case QType::IQ4_NL:
            return dispatch_cols<KIQ4_NL>;
        case QType::Q4_K:
            return dispatch_cols<KQ4_K>;
        case QType::Q5_K:
            return dispatch_cols<KQ5_K>;
        case QType::Q6_K:
            return dispatch_cols<KQ6_K>;
        default:
            return nullptr;
    }
}

QuantizeRowFn avx2_quantize(QType t) {
    switch (t) {
        case QType::Q8_0:
            return quantize_q8_0;
        case QType::Q8_K:
            return quantize_q8_K;
        default:
            return nullptr;
    }
}

}  // namespace dl::quant::kernels

#else

namespace dl::quant::kernels {
DotColsFn avx2(QType) {
    return nullptr;
}
}  // namespace dl::quant::kernels

#endif
