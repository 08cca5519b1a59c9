// Scalar dequantization of every supported block format: the executable form of the layouts
// documented in blocks.h, and the reference the dot products are tested against.
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace dl::quant {

namespace {

void deq_q4_0(const block_q4_0* b, float* y) {
    float d = f16_to_f32(b->d);
    for (int j = 0; j < 16; ++j) {
        y[j] = d * ((b->qs[j] & 0xF) - 8);
        y[j + 16] = d * ((b->qs[j] >> 4) - 8);
    }
}

void deq_q4_1(const block_q4_1* b, float* y) {
    float d = f16_to_f32(b->d), m = f16_to_f32(b->m);
    for (int j = 0; j < 16; ++j) {
        y[j] = d * (b->qs[j] & 0xF) + m;
        y[j + 16] = d * (b->qs[j] >> 4) + m;
    }
}

uint32_t load_u32(const uint8_t* p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void deq_q5_0(const block_q5_0* b, float* y) {
    float d = f16_to_f32(b->d);
    uint32_t h = load_u32(b->qh);
    for (int j = 0; j < 16; ++j) {
        int q0 = (b->qs[j] & 0xF) | (int)((h >> j & 1) << 4);
        int q1 = (b->qs[j] >> 4) | (int)((h >> (j + 16) & 1) << 4);
        y[j] = d * (q0 - 16);
        y[j + 16] = d * (q1 - 16);
    }
}

void deq_q5_1(const block_q5_1* b, float* y) {
    float d = f16_to_f32(b->d), m = f16_to_f32(b->m);
    uint32_t h = load_u32(b->qh);
    for (int j = 0; j < 16; ++j) {
        int q0 = (b->qs[j] & 0xF) | (int)((h >> j & 1) << 4);
        int q1 = (b->qs[j] >> 4) | (int)((h >> (j + 16) & 1) << 4);
        y[j] = d * q0 + m;
        y[j + 16] = d * q1 + m;
    }
}

void deq_q8_0(const block_q8_0* b, float* y) {
    float d = f16_to_f32(b->d);
    for (int j = 0; j < 32; ++j) y[j] = d * b->qs[j];
}

void deq_q8_1(const block_q8_1* b, float* y) {
    float d = f16_to_f32(b->d);
    for (int j = 0; j < 32; ++j) y[j] = d * b->qs[j];
}

void deq_q2_K(const block_q2_K* b, float* y) {
    float d = f16_to_f32(b->d), dmin = f16_to_f32(b->dmin);
    for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 32; ++l) {
                int i = 8 * h + 2 * j + (l >= 16);
                int q = (b->qs[32 * h + l] >> (2 * j)) & 3;
                y[128 * h + 32 * j + l] = d * (b->scales[i] & 0xF) * q - dmin * (b->scales[i] >> 4);
            }
}

void deq_q3_K(const block_q3_K* b, float* y) {
    float d = f16_to_f32(b->d);
    for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 32; ++l) {
                int i = 8 * h + 2 * j + (l >= 16);
                int q = (b->qs[32 * h + l] >> (2 * j)) & 3;
                if (!(b->hmask[l] >> (4 * h + j) & 1)) q -= 4;
                y[128 * h + 32 * j + l] = d * (q3_K_scale(b->scales, i) - 32) * q;
            }
}

void deq_q4_K(const block_q4_K* b, float* y) {
    float d = f16_to_f32(b->d), dmin = f16_to_f32(b->dmin);
    for (int c = 0; c < 4; ++c) {
        uint8_t sc0, m0, sc1, m1;
        get_scale_min_k4(2 * c, b->scales, &sc0, &m0);
        get_scale_min_k4(2 * c + 1, b->scales, &sc1, &m1);
        float d0 = d * sc0, d1 = d * sc1, n0 = dmin * m0, n1 = dmin * m1;
        for (int l = 0; l < 32; ++l) {
            y[64 * c + l] = d0 * (b->qs[32 * c + l] & 0xF) - n0;
            y[64 * c + 32 + l] = d1 * (b->qs[32 * c + l] >> 4) - n1;
        }
    }
}

void deq_q5_K(const block_q5_K* b, float* y) {
    float d = f16_to_f32(b->d), dmin = f16_to_f32(b->dmin);
    for (int c = 0; c < 4; ++c) {
        uint8_t sc0, m0, sc1, m1;
        get_scale_min_k4(2 * c, b->scales, &sc0, &m0);
        get_scale_min_k4(2 * c + 1, b->scales, &sc1, &m1);
        float d0 = d * sc0, d1 = d * sc1, n0 = dmin * m0, n1 = dmin * m1;
        for (int l = 0; l < 32; ++l) {
            int q0 = (b->qs[32 * c + l] & 0xF) + 16 * (b->qh[l] >> (2 * c) & 1);
            int q1 = (b->qs[32 * c + l] >> 4) + 16 * (b->qh[l] >> (2 * c + 1) & 1);
            y[64 * c + l] = d0 * q0 - n0;
            y[64 * c + 32 + l] = d1 * q1 - n1;
        }
    }
}

void deq_q6_K(const block_q6_K* b, float* y) {
    float d = f16_to_f32(b->d);
    for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = b->ql + 64 * h;
        const uint8_t* qh = b->qh + 32 * h;
        const int8_t* sc = b->scales + 8 * h;
        for (int l = 0; l < 32; ++l) {
            int q[4] = {(ql[l] & 0xF) | ((qh[l] >> 0 & 3) << 4),
                        (ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4),
                        (ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4),
                        (ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)};
            for (int k = 0; k < 4; ++k)
                y[128 * h + l + 32 * k] = d * sc[l / 16 + 2 * k] * (q[k] - 32);
        }
    }
}

void deq_q8_K(const block_q8_K* b, float* y) {
    for (int j = 0; j < QK_K; ++j) y[j] = b->d * b->qs[j];
}

void deq_iq4_nl(const block_iq4_nl* b, float* y) {
    float d = f16_to_f32(b->d);
    for (int j = 0; j < 16; ++j) {
        y[j] = d * kIQ4NLValues[b->qs[j] & 0xF];
        y[j + 16] = d * kIQ4NLValues[b->qs[j] >> 4];
    }
}

void deq_iq4_xs(const block_iq4_xs* b, float* y) {
    float d = f16_to_f32(b->d);
    for (int ib = 0; ib < 8; ++ib) {
        int ls = ((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) |
                 (((b->scales_h >> (2 * ib)) & 3) << 4);
        float dl = d * (ls - 32);
        const uint8_t* qs = b->qs + 16 * ib;
        for (int j = 0; j < 16; ++j) {
            y[32 * ib + j] = dl * kIQ4NLValues[qs[j] & 0xF];
            y[32 * ib + j + 16] = dl * kIQ4NLValues[qs[j] >> 4];
        }
    }
}

template <typename Block>
void each_block(void (*f)(const Block*, float*), const void* src, float* dst, int64_t n,
                int64_t qk) {
    const Block* b = static_cast<const Block*>(src);
    for (int64_t i = 0; i < n / qk; ++i) f(b + i, dst + i * qk);
}

}  // namespace

bool can_dequantize(QType t) {
    switch (t) {
        case QType::F32:
        case QType::F16:
        case QType::BF16:
        case QType::Q4_0:
        case QType::Q4_1:
        case QType::Q5_0:
        case QType::Q5_1:
        case QType::Q8_0:
        case QType::Q8_1:
        case QType::Q2_K:
        case QType::Q3_K:
        case QType::Q4_K:
        case QType::Q5_K:
        case QType::Q6_K:
        case QType::Q8_K:
        case QType::IQ4_NL:
        case QType::IQ4_XS:
            return true;
        default:
            return false;
    }
}

bool row_ok(QType t, int64_t n) {
    if (n <= 0) return false;
    auto i = qtype_info(static_cast<uint32_t>(t));
    return i && n % i->block_size == 0;
}

void dequantize(QType t, const void* src, float* dst, int64_t n) {
    DL_ASSERT(row_ok(t, n));
    switch (t) {
        case QType::F32:
            std::memcpy(dst, src, (size_t)n * 4);
            return;
        case QType::F16: {
            const uint16_t* s = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
            return;
        }
        case QType::BF16: {
            const uint16_t* s = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
            return;
        }
        case QType::Q4_0:
            return each_block(deq_q4_0, src, dst, n, 32);
        case QType::Q4_1:
            return each_block(deq_q4_1, src, dst, n, 32);
        case QType::Q5_0:
            return each_block(deq_q5_0, src, dst, n, 32);
        case QType::Q5_1:
            return each_block(deq_q5_1, src, dst, n, 32);
        case QType::Q8_0:
            return each_block(deq_q8_0, src, dst, n, 32);
        case QType::Q8_1:
            return each_block(deq_q8_1, src, dst, n, 32);
        case QType::Q2_K:
            return each_block(deq_q2_K, src, dst, n, QK_K);
        case QType::Q3_K:
            return each_block(deq_q3_K, src, dst, n, QK_K);
        case QType::Q4_K:
            return each_block(deq_q4_K, src, dst, n, QK_K);
        case QType::Q5_K:
            return each_block(deq_q5_K, src, dst, n, QK_K);
        case QType::Q6_K:
            return each_block(deq_q6_K, src, dst, n, QK_K);
        case QType::Q8_K:
            return each_block(deq_q8_K, src, dst, n, QK_K);
        case QType::IQ4_NL:
            return each_block(deq_iq4_nl, src, dst, n, 32);
        case QType::IQ4_XS:
            return each_block(deq_iq4_xs, src, dst, n, QK_K);
        default:
            break;
    }
    fail("cannot dequantize tensors of type {}", qtype_name(t));
}

}  // namespace dl::quant
