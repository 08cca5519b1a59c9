// AVX-512 VNNI versions of the K-quant dot products against Q8_K (and of the 32-element blocks
// against Q8_0), in 256-bit vectors: the same integer arithmetic as dot_avx2.cpp with fewer
// instructions a block. vpdpwssd adds the scaled pair sums into the 32-bit lanes in one
// instruction (AVX2: madd, then add); vpdpbusd does a Q8_0 block's products and their sums of four
// in one (AVX2: maddubs, then madd); the sub-blocks' scales and mins are spread across lanes by
// vpermw once a block instead of being unpacked byte by byte; and the weights' mins and Q6_K's
// offset of 32 are applied as vector products of the activations' block sums rather than in a
// scalar loop for every column. Compiled for those features whatever the build flags and only
// called after a run-time CPU check (dot.cpp); results equal the scalar reference up to float
// summation order.
#include "quant/kernels.h"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstring>

#include "core/half.h"
#include "quant/blocks.h"

#define DL_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define DL_TARGET DL_VNNI

namespace dl::quant::kernels {

namespace {

#include "quant/dot_x86.h"

// Signed bytes: |w| (unsigned) times y with w's sign, so that vpdpbusd's unsigned-by-signed
// products are w * y (|w|, |y| <= 127).
template <int NC, typename Decode>
DL_VNNI void q8_0_family_cols(const void* w, const void* x, size_t xs, float* out, int64_t n) {
    using Block = typename Decode::Block;
    const Block* a = static_cast<const Block*>(w);
    __m256 acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; ++i) {
        const __m256i q = Decode::run(a[i]);
        const __m256i aq = _mm256_abs_epi8(q);
        const float dw = f16(a[i].d);
        for (int c = 0; c < NC; ++c) {
            const block_q8_0* b = reinterpret_cast<const block_q8_0*>(col(x, xs, c)) + i;
            const __m256i y = _mm256_sign_epi8(load(b->qs), q);
            const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aq, y);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dw * f16(b->d)), _mm256_cvtepi32_ps(s), acc[c]);
        }
    }
    for (int c = 0; c < NC; ++c) out[c] = hsum(acc[c]);
}

// ---- K-quants against Q8_K ----

// A Q4_K/Q5_K block's eight 6-bit scales and mins as 16-bit lanes: scales in 0..7, mins in
// 8..15 (the packing of blocks.h, four sub-blocks a 32-bit word).
DL_VNNI inline __m256i scales_mins_k4(const uint8_t* s) {
    uint32_t w[3];
    std::memcpy(w, s, 12);
    const uint32_t six = 0x3f3f3f3fu, four = 0x0f0f0f0fu, two = 0x03030303u;
    const uint32_t sc_lo = w[0] & six, m_lo = w[1] & six;
    const uint32_t sc_hi = (w[2] & four) | (((w[0] >> 6) & two) << 4);
    const uint32_t m_hi = ((w[2] >> 4) & four) | (((w[1] >> 6) & two) << 4);
    return _mm256_cvtepu8_epi16(_mm_setr_epi32((int)sc_lo, (int)sc_hi, (int)m_lo, (int)m_hi));
}

template <int NC, bool kHigh, typename Block>
DL_VNNI void q45_K_cols(const void* w, const void* x, size_t xs, float* out, int64_t n) {
    const Block* a = static_cast<const Block*>(w);
    __m256 acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    // Lanes 2j and 2j + 1 take min j (lane 8 + j of the scales' vector): against the 16 block
    // sums of Q8_K (16 values each) one vpmaddwd gives min j times sub-block j's sum in lane j.
    const __m256i min_pairs =
        _mm256_setr_epi16(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const __m256i sm = scales_mins_k4(a[i].scales);
        __m256i sc[8];
        for (int j = 0; j < 8; ++j) sc[j] = _mm256_permutexvar_epi16(_mm256_set1_epi16(j), sm);
        const __m256i mins = _mm256_permutexvar_epi16(min_pairs, sm);
        const float d = f16(a[i].d), dmin = f16(a[i].dmin);
        __m256i hbits = _mm256_setzero_si256();
        if constexpr (kHigh) hbits = load(a[i].qh);
        __m256i q[8];
        for (int k = 0; k < 4; ++k) {
            const __m256i b = load(a[i].qs + 32 * k);
            q[2 * k] = _mm256_and_si256(b, low4);
            q[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(b, 4), low4);
            if constexpr (kHigh) {
                const __m256i bit = _mm256_set1_epi8(1);
                const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * k), bit);
                const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * k + 1), bit);
                q[2 * k] = _mm256_or_si256(q[2 * k], _mm256_slli_epi16(h0, 4));
                q[2 * k + 1] = _mm256_or_si256(q[2 * k + 1], _mm256_slli_epi16(h1, 4));
            }
        }
        for (int c = 0; c < NC; ++c) {
            const block_q8_K* b = reinterpret_cast<const block_q8_K*>(col(x, xs, c)) + i;
            __m256i sum = _mm256_setzero_si256();
            for (int j = 0; j < 8; ++j)
                sum = _mm256_dpwssd_epi32(sum, _mm256_maddubs_epi16(q[j], load(b->qs + 32 * j)),
                                          sc[j]);
            const __m256i msum = _mm256_madd_epi16(load(b->bsums), mins);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(b->d * d), _mm256_cvtepi32_ps(sum), acc[c]);
            acc[c] =
                _mm256_fnmadd_ps(_mm256_set1_ps(b->d * dmin), _mm256_cvtepi32_ps(msum), acc[c]);
        }
    }
    for (int c = 0; c < NC; ++c) out[c] = hsum(acc[c]);
}

template <int NC>
DL_VNNI void q6_K_cols(const void* w, const void* x, size_t xs, float* out, int64_t n) {
    const block_q6_K* a = static_cast<const block_q6_K*>(w);
    __m256 acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        // The 16 scales as 16-bit lanes; q[4h + k] holds sub-blocks 8h + 2k (its low 16 bytes)
        // and 8h + 2k + 1, whose block sums are those of Q8_K with the same indices.
        const __m256i s16 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a[i].scales)));
        // Every value carries +32: minus 32 * scale times each sub-block's sum.
        const __m256i offset = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(s16, 5));
        __m256i q[8], scl[8];
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = a[i].ql + 64 * h;
            const __m256i l0 = load(ql), l1 = load(ql + 32), hb = load(a[i].qh + 32 * h);
            q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l0, low4), q6_high(hb, 0));
            q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l1, low4), q6_high(hb, 2));
            q[4 * h + 2] =
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), q6_high(hb, 4));
            q[4 * h + 3] =
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4), q6_high(hb, 6));
            for (int k = 0; k < 4; ++k) {
                const short lo = (short)(8 * h + 2 * k), hi = (short)(lo + 1);
                const __m256i idx = _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
                scl[4 * h + k] = _mm256_permutexvar_epi16(idx, s16);
            }
        }
        const float d = f16(a[i].d);
        for (int c = 0; c < NC; ++c) {
            const block_q8_K* b = reinterpret_cast<const block_q8_K*>(col(x, xs, c)) + i;
            __m256i sum = _mm256_madd_epi16(load(b->bsums), offset);
            for (int g = 0; g < 8; ++g)
                sum = _mm256_dpwssd_epi32(sum, _mm256_maddubs_epi16(q[g], load(b->qs + 32 * g)),
                                          scl[g]);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(b->d * d), _mm256_cvtepi32_ps(sum), acc[c]);
        }
    }
    for (int c = 0; c < NC; ++c) out[c] = hsum(acc[c]);
}

DL_KERNEL(KQ8_0, (q8_0_family_cols<NC, DecodeQ8_0>))
DL_KERNEL(KQ4_0, (q8_0_family_cols<NC, DecodeQ4_0>))
DL_KERNEL(KIQ4_NL, (q8_0_family_cols<NC, DecodeIQ4_NL>))
DL_KERNEL(KQ4_K, (q45_K_cols<NC, false, block_q4_K>))
DL_KERNEL(KQ5_K, (q45_K_cols<NC, true, block_q5_K>))
DL_KERNEL(KQ6_K, q6_K_cols<NC>)
#undef DL_KERNEL

}  // namespace

DotColsFn avx512_vnni(QType t) {
    switch (t) {
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

}  // namespace dl::quant::kernels

#else

namespace dl::quant::kernels {
DotColsFn avx512_vnni(QType) {
    return nullptr;
}
}  // namespace dl::quant::kernels

#endif
