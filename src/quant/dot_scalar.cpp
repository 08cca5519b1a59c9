// Portable scalar dot products of one weight row with activations in vec_dot_type format. They
// define what every vectorised kernel must compute: integer sums inside each block (exact), one
// float multiply-add per block or sub-block scale.
#include "core/half.h"
#include "quant/blocks.h"
#include "quant/kernels.h"

namespace dl::quant::kernels {

namespace {

float dot_f32(const void* w, const void* x, int64_t n) {
    const float* a = static_cast<const float*>(w);
    const float* b = static_cast<const float*>(x);
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}

float dot_f16(const void* w, const void* x, int64_t n) {
    const uint16_t* a = static_cast<const uint16_t*>(w);
    const float* b = static_cast<const float*>(x);
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += f16_to_f32(a[i]) * b[i];
    return s;
}

float dot_bf16(const void* w, const void* x, int64_t n) {
    const uint16_t* a = static_cast<const uint16_t*>(w);
    const float* b = static_cast<const float*>(x);
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += bf16_to_f32(a[i]) * b[i];
    return s;
}

uint32_t load_u32(const uint8_t* p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// 32-element weight blocks against Q8_0: integer sum per block times d_w * d_x.
template <typename Block, typename Unpack>
float dot_q8_0_family(const void* w, const void* x, int64_t n, Unpack unpack) {
    const Block* a = static_cast<const Block*>(w);
    const block_q8_0* b = static_cast<const block_q8_0*>(x);
    float s = 0;
    for (int64_t i = 0; i < n / 32; ++i) {
        int q[32];
        unpack(a[i], q);
        int sum = 0;
        for (int j = 0; j < 32; ++j) sum += q[j] * b[i].qs[j];
        s += f16_to_f32(a[i].d) * f16_to_f32(b[i].d) * (float)sum;
    }
    return s;
}

float dot_q4_0(const void* w, const void* x, int64_t n) {
    return dot_q8_0_family<block_q4_0>(w, x, n, [](const block_q4_0& b, int* q) {
        for (int j = 0; j < 16; ++j) q[j] = (b.qs[j] & 0xF) - 8, q[j + 16] = (b.qs[j] >> 4) - 8;
    });
}

float dot_q5_0(const void* w, const void* x, int64_t n) {
    return dot_q8_0_family<block_q5_0>(w, x, n, [](const block_q5_0& b, int* q) {
        uint32_t h = load_u32(b.qh);
        for (int j = 0; j < 16; ++j) {
            q[j] = ((b.qs[j] & 0xF) | (int)((h >> j & 1) << 4)) - 16;
            q[j + 16] = ((b.qs[j] >> 4) | (int)((h >> (j + 16) & 1) << 4)) - 16;
        }
    });
}

float dot_q8_0(const void* w, const void* x, int64_t n) {
    return dot_q8_0_family<block_q8_0>(w, x, n, [](const block_q8_0& b, int* q) {
        for (int j = 0; j < 32; ++j) q[j] = b.qs[j];
    });
}

float dot_iq4_nl(const void* w, const void* x, int64_t n) {
    return dot_q8_0_family<block_iq4_nl>(w, x, n, [](const block_iq4_nl& b, int* q) {
        for (int j = 0; j < 16; ++j)
            q[j] = kIQ4NLValues[b.qs[j] & 0xF], q[j + 16] = kIQ4NLValues[b.qs[j] >> 4];
    });
}

// Offset formats against Q8_1: d_w d_x sum(q qx) + m_w d_x sum(qx).
template <typename Block, typename Unpack>
float dot_q8_1_family(const void* w, const void* x, int64_t n, Unpack unpack) {
    const Block* a = static_cast<const Block*>(w);
    const block_q8_1* b = static_cast<const block_q8_1*>(x);
    float s = 0;
    for (int64_t i = 0; i < n / 32; ++i) {
        int q[32];
        unpack(a[i], q);
        int sum = 0, sumx = 0;
        for (int j = 0; j < 32; ++j) sum += q[j] * b[i].qs[j], sumx += b[i].qs[j];
        // sum(qx) is recomputed rather than read from the fp16 s field: exact, and cheap here
        const float dx = f16_to_f32(b[i].d);
        s += f16_to_f32(a[i].d) * dx * (float)sum + f16_to_f32(a[i].m) * dx * (float)sumx;
    }
    return s;
}

float dot_q4_1(const void* w, const void* x, int64_t n) {
    return dot_q8_1_family<block_q4_1>(w, x, n, [](const block_q4_1& b, int* q) {
        for (int j = 0; j < 16; ++j) q[j] = b.qs[j] & 0xF, q[j + 16] = b.qs[j] >> 4;
    });
}

float dot_q5_1(const void* w, const void* x, int64_t n) {
    return dot_q8_1_family<block_q5_1>(w, x, n, [](const block_q5_1& b, int* q) {
        uint32_t h = load_u32(b.qh);
        for (int j = 0; j < 16; ++j) {
            q[j] = (b.qs[j] & 0xF) | (int)((h >> j & 1) << 4);
            q[j + 16] = (b.qs[j] >> 4) | (int)((h >> (j + 16) & 1) << 4);
        }
    });
}

// Q4_K / Q5_K: d_x * (d * sum_j sc_j sum(q qx) - dmin * sum_j m_j * sum(qx over sub-block j)).
template <typename Block, bool kHigh>
float dot_q45_K(const void* w, const void* x, int64_t n) {
    const Block* a = static_cast<const Block*>(w);
    const block_q8_K* b = static_cast<const block_q8_K*>(x);
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int sumq = 0, summ = 0;
        for (int j = 0; j < 8; ++j) {
            uint8_t sc, m;
            get_scale_min_k4(j, a[i].scales, &sc, &m);
            int c = j / 2, hi = j % 2, sub = 0;
            for (int l = 0; l < 32; ++l) {
                int q = hi ? a[i].qs[32 * c + l] >> 4 : a[i].qs[32 * c + l] & 0xF;
                if constexpr (kHigh) q += 16 * (a[i].qh[l] >> j & 1);
                sub += q * b[i].qs[32 * j + l];
            }
            sumq += sc * sub;
            summ += m * (b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
        }
        s += b[i].d * (f16_to_f32(a[i].d) * (float)sumq - f16_to_f32(a[i].dmin) * (float)summ);
    }
    return s;
}

float dot_q6_K(const void* w, const void* x, int64_t n) {
    const block_q6_K* a = static_cast<const block_q6_K*>(w);
    const block_q8_K* b = static_cast<const block_q8_K*>(x);
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int q[QK_K];
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = a[i].ql + 64 * h;
            const uint8_t* qh = a[i].qh + 32 * h;
            for (int l = 0; l < 32; ++l) {
                q[128 * h + l] = ((ql[l] & 0xF) | ((qh[l] >> 0 & 3) << 4)) - 32;
                q[128 * h + l + 32] = ((ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4)) - 32;
                q[128 * h + l + 64] = ((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32;
                q[128 * h + l + 96] = ((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;
            }
        }
        int sum = 0;
        for (int sb = 0; sb < 16; ++sb) {
            int sub = 0;
            for (int l = 0; l < 16; ++l) sub += q[16 * sb + l] * b[i].qs[16 * sb + l];
            sum += a[i].scales[sb] * sub;
        }
        s += b[i].d * f16_to_f32(a[i].d) * (float)sum;
    }
    return s;
}

float dot_q3_K(const void* w, const void* x, int64_t n) {
    const block_q3_K* a = static_cast<const block_q3_K*>(w);
    const block_q8_K* b = static_cast<const block_q8_K*>(x);
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int sum = 0;
        for (int h = 0; h < 2; ++h)
            for (int j = 0; j < 4; ++j)
                for (int half = 0; half < 2; ++half) {
                    int sub = 0;
                    for (int l = 16 * half; l < 16 * half + 16; ++l) {
                        int q = (a[i].qs[32 * h + l] >> (2 * j)) & 3;
                        if (!(a[i].hmask[l] >> (4 * h + j) & 1)) q -= 4;
                        sub += q * b[i].qs[128 * h + 32 * j + l];
                    }
                    sum += (q3_K_scale(a[i].scales, 8 * h + 2 * j + half) - 32) * sub;
                }
        s += b[i].d * f16_to_f32(a[i].d) * (float)sum;
    }
    return s;
}

float dot_q2_K(const void* w, const void* x, int64_t n) {
    const block_q2_K* a = static_cast<const block_q2_K*>(w);
    const block_q8_K* b = static_cast<const block_q8_K*>(x);
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int sumq = 0, summ = 0;
        for (int h = 0; h < 2; ++h)
            for (int j = 0; j < 4; ++j)
                for (int half = 0; half < 2; ++half) {
                    int sb = 8 * h + 2 * j + half, sub = 0;
                    for (int l = 16 * half; l < 16 * half + 16; ++l)
                        sub +=
                            ((a[i].qs[32 * h + l] >> (2 * j)) & 3) * b[i].qs[128 * h + 32 * j + l];
                    sumq += (a[i].scales[sb] & 0xF) * sub;
                    summ += (a[i].scales[sb] >> 4) * b[i].bsums[sb];
                }
        s += b[i].d * (f16_to_f32(a[i].d) * (float)sumq - f16_to_f32(a[i].dmin) * (float)summ);
    }
    return s;
}

float dot_iq4_xs(const void* w, const void* x, int64_t n) {
    const block_iq4_xs* a = static_cast<const block_iq4_xs*>(w);
    const block_q8_K* b = static_cast<const block_q8_K*>(x);
    float s = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int sum = 0;
        for (int ib = 0; ib < 8; ++ib) {
            int ls = ((a[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) |
                     (((a[i].scales_h >> (2 * ib)) & 3) << 4);
            const uint8_t* qs = a[i].qs + 16 * ib;
            const int8_t* qx = b[i].qs + 32 * ib;
            int sub = 0;
            for (int j = 0; j < 16; ++j)
                sub += kIQ4NLValues[qs[j] & 0xF] * qx[j] + kIQ4NLValues[qs[j] >> 4] * qx[j + 16];
            sum += (ls - 32) * sub;
        }
        s += b[i].d * f16_to_f32(a[i].d) * (float)sum;
    }
    return s;
}

// The scalar multi-column form: one column at a time.
template <float (*Dot)(const void*, const void*, int64_t)>
void cols(const void* w, const void* x, size_t x_stride, int ncols, float* out, int64_t n) {
    for (int c = 0; c < ncols; ++c) out[c] = Dot(w, static_cast<const char*>(x) + c * x_stride, n);
}

}  // namespace

DotColsFn scalar(QType t) {
    switch (t) {
        case QType::F32:
            return cols<dot_f32>;
        case QType::F16:
            return cols<dot_f16>;
        case QType::BF16:
            return cols<dot_bf16>;
        case QType::Q4_0:
            return cols<dot_q4_0>;
        case QType::Q4_1:
            return cols<dot_q4_1>;
        case QType::Q5_0:
            return cols<dot_q5_0>;
        case QType::Q5_1:
            return cols<dot_q5_1>;
        case QType::Q8_0:
            return cols<dot_q8_0>;
        case QType::Q2_K:
            return cols<dot_q2_K>;
        case QType::Q3_K:
            return cols<dot_q3_K>;
        case QType::Q4_K:
            return cols<dot_q45_K<block_q4_K, false>>;
        case QType::Q5_K:
            return cols<dot_q45_K<block_q5_K, true>>;
        case QType::Q6_K:
            return cols<dot_q6_K>;
        case QType::IQ4_NL:
            return cols<dot_iq4_nl>;
        case QType::IQ4_XS:
            return cols<dot_iq4_xs>;
        default:
            return nullptr;
    }
}

}  // namespace dl::quant::kernels
