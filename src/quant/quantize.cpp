// Quantization of float rows into the block formats. The low-bit formats search the block scale
// (and offset) for the least squared error instead of mapping min/max onto the range, then
// quantize their sub-block scales and re-round every value against the scale actually stored,
// so that dequantize(quantize(x)) is as close to x as the format allows.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace dl::quant {

namespace {

// Round to nearest, ties to even (as lrintf in the default mode, and as the AVX2 activation
// quantizers): adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits. Inputs are
// first limited to |x| < 2^22, where the trick is exact; NaN ends up clamped by the callers.
inline int round_int(float x) {
    x = x < -4e6f ? -4e6f : x > 4e6f ? 4e6f : x;
    float t = x + 12582912.0f;
    int32_t i;
    std::memcpy(&i, &t, 4);
    return (i & 0x007fffff) - 0x00400000;
}
inline int clampi(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}
// The value an fp16 field will hold.
inline float as_f16(float x) {
    return f16_to_f32(f32_to_f16(x));
}

// Least-squares scale for x ~ d * q with integer q in [qmin, qmax]: tries a grid of scales
// around the one that maps the largest magnitude onto either end of the range, refits d for each
// rounding, and keeps the best. Writes q; returns d (0 for an all-zero block).
float search_symmetric(const float* x, int n, int qmin, int qmax, int* q) {
    float amax = 0, vmax = 0;
    for (int i = 0; i < n; ++i)
        if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), vmax = x[i];
    if (amax == 0) {
        for (int i = 0; i < n; ++i) q[i] = 0;
        return 0;
    }
    float best_score = -1, best_d = 0;
    auto try_scale = [&](float d) {
        if (d == 0 || !std::isfinite(d)) return;
        float sxq = 0, sqq = 0;
        const float id = 1.0f / d;
        for (int i = 0; i < n; ++i) {
            int v = clampi(round_int(x[i] * id), qmin, qmax);
            sxq += x[i] * v;
            sqq += (float)v * v;
        }
        if (sqq == 0) return;
        // error after refitting = sum(x^2) - sxq^2 / sqq: maximise the second term
        float score = sxq * sxq / sqq;
        if (score > best_score) best_score = score, best_d = sxq / sqq;
    };
    // Map vmax onto the negative end (-qmin levels) or the positive end (qmax levels).
    for (int end : {qmin, qmax}) {
        if (end == 0) continue;
        for (int k = -10; k <= 6; ++k) try_scale(vmax / (end * (1.0f + 0.025f * k)));
    }
    try_scale(best_d);  // one refinement round from the best refit
    for (int i = 0; i < n; ++i) q[i] = clampi(round_int(x[i] / best_d), qmin, qmax);
    return best_d;
}

// Least-squares fit of x ~ d * q + m with integer q in [0, nmax]. When min_nonpos, m is held
// <= 0 (the K-quant formats store -m as an unsigned min). Writes q; returns d and m.
void search_affine(const float* x, int n, int nmax, bool min_nonpos, int* q, float* d_out,
                   float* m_out) {
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
    if (min_nonpos) lo = std::min(lo, 0.0f);
    if (hi == lo) {
        for (int i = 0; i < n; ++i) q[i] = 0;
        *d_out = 0;
        *m_out = lo;
        return;
    }
    // Each candidate scale rounds x once; d and m are refitted to that rounding and scored by
    // the refitted squared error, computed from the sums without another pass.
    float sx = 0, sxx = 0;
    for (int i = 0; i < n; ++i) sx += x[i], sxx += x[i] * x[i];
    float best_err = INFINITY, best_d = (hi - lo) / nmax, best_m = lo;
    for (int k = -10; k <= 10; k += 1) {
        const float d0 = (hi - lo) / (nmax + 0.1f * k);
        if (d0 <= 0) continue;
        const float id0 = 1.0f / d0;
        float sq = 0, sqq = 0, sqx = 0;
        for (int i = 0; i < n; ++i) {
            const float v = (float)clampi(round_int((x[i] - lo) * id0), 0, nmax);
            sq += v, sqq += v * v, sqx += v * x[i];
        }
        const float sw = (float)n, det = sw * sqq - sq * sq;
        if (det <= 0) continue;
        float d = (sw * sqx - sq * sx) / det;
        float m = (sqq * sx - sq * sqx) / det;
        if (min_nonpos && m > 0) {
            m = 0;
            d = sqq > 0 ? sqx / sqq : 0;
        }
        if (d <= 0) continue;
        const float err =
            sxx - 2 * d * sqx - 2 * m * sx + d * d * sqq + 2 * d * m * sq + m * m * sw;
        if (err < best_err) best_err = err, best_d = d, best_m = m;
    }
    *d_out = best_d;
    *m_out = best_m;
    for (int i = 0; i < n; ++i) q[i] = clampi(round_int((x[i] - best_m) / best_d), 0, nmax);
}

// Index of the IQ4_NL table entry nearest to v, by search (builds the lookup table below).
int nearest_iq4_slow(float v) {
    int best = 0;
    for (int k = 1; k < 16; ++k)
        if (std::fabs(kIQ4NLValues[k] - v) < std::fabs(kIQ4NLValues[best] - v)) best = k;
    return best;
}

// The same through a table over half-unit steps of [-128, 128): the entries are integers, so the
// midpoints between them fall on half units and every step has a single nearest entry.
int nearest_iq4(float v) {
    static const auto lut = [] {
        std::array<uint8_t, 512> t{};
        for (int i = 0; i < 512; ++i) t[i] = (uint8_t)nearest_iq4_slow((i + 0.5f) / 2 - 128);
        return t;
    }();
    const float f = (v + 128) * 2;
    const int i = !(f >= 0) ? 0 : f >= 511 ? 511 : (int)f;
    return lut[i];
}

// Least-squares scale for x ~ d * kIQ4NLValues[q]; writes q, returns d.
float search_iq4(const float* x, int n, int* q) {
    float amax = 0, vmax = 0;
    for (int i = 0; i < n; ++i)
        if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), vmax = x[i];
    if (amax == 0) {
        for (int i = 0; i < n; ++i) q[i] = nearest_iq4(0);
        return 0;
    }
    float best_score = -1, best_d = 0;
    auto try_scale = [&](float d) {
        if (d == 0 || !std::isfinite(d)) return;
        float sxk = 0, skk = 0;
        const float id = 1.0f / d;
        for (int i = 0; i < n; ++i) {
            float k = kIQ4NLValues[nearest_iq4(x[i] * id)];
            sxk += x[i] * k;
            skk += k * k;
        }
        float score = sxk * sxk / skk;
        if (score > best_score) best_score = score, best_d = sxk / skk;
    };
    for (float end : {-127.0f, 113.0f})
        for (int k = -8; k <= 8; ++k) try_scale(vmax / (end * (1.0f + 0.02f * k)));
    try_scale(best_d);
    for (int i = 0; i < n; ++i) q[i] = nearest_iq4(x[i] / best_d);
    return best_d;
}

// Re-rounds x against a stored scale (0 gives 0).
inline int requant(float x, float d, int lo, int hi) {
    return d == 0 ? clampi(0, lo, hi) : clampi(round_int(x / d), lo, hi);
}

// ---- 32-element formats ----

void quant_q4_0(const float* x, block_q4_0* b) {
    int q[32];
    float d = as_f16(search_symmetric(x, 32, -8, 7, q));
    b->d = f32_to_f16(d);
    for (int j = 0; j < 16; ++j) {
        int a = requant(x[j], d, -8, 7) + 8, c = requant(x[j + 16], d, -8, 7) + 8;
        b->qs[j] = (uint8_t)(a | c << 4);
    }
}

void quant_q5_0(const float* x, block_q5_0* b) {
    int q[32];
    float d = as_f16(search_symmetric(x, 32, -16, 15, q));
    b->d = f32_to_f16(d);
    uint32_t h = 0;
    for (int j = 0; j < 16; ++j) {
        int a = requant(x[j], d, -16, 15) + 16, c = requant(x[j + 16], d, -16, 15) + 16;
        b->qs[j] = (uint8_t)((a & 0xF) | (c & 0xF) << 4);
        h |= (uint32_t)(a >> 4) << j | (uint32_t)(c >> 4) << (j + 16);
    }
    for (int i = 0; i < 4; ++i) b->qh[i] = (uint8_t)(h >> (8 * i));
}

// Affine 32-element blocks: returns the stored d and m and the re-rounded q.
void affine32(const float* x, int nmax, half* dh, half* mh, int* q) {
    float d, m;
    search_affine(x, 32, nmax, false, q, &d, &m);
    *dh = f32_to_f16(d);
    *mh = f32_to_f16(m);
    float ds = f16_to_f32(*dh), ms = f16_to_f32(*mh);
    for (int j = 0; j < 32; ++j) q[j] = requant(x[j] - ms, ds, 0, nmax);
}

void quant_q4_1(const float* x, block_q4_1* b) {
    int q[32];
    affine32(x, 15, &b->d, &b->m, q);
    for (int j = 0; j < 16; ++j) b->qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
}

void quant_q5_1(const float* x, block_q5_1* b) {
    int q[32];
    affine32(x, 31, &b->d, &b->m, q);
    uint32_t h = 0;
    for (int j = 0; j < 16; ++j) {
        b->qs[j] = (uint8_t)((q[j] & 0xF) | (q[j + 16] & 0xF) << 4);
        h |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + 16] >> 4) << (j + 16);
    }
    for (int i = 0; i < 4; ++i) b->qh[i] = (uint8_t)(h >> (8 * i));
}

void quant_q8_0(const float* x, block_q8_0* b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    float d = amax / 127;
    b->d = f32_to_f16(d);
    float id = d != 0 ? 1.0f / d : 0;
    for (int j = 0; j < 32; ++j) b->qs[j] = (int8_t)clampi(round_int(x[j] * id), -127, 127);
}

void quant_q8_1(const float* x, block_q8_1* b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    float d = amax / 127;
    float id = d != 0 ? 1.0f / d : 0;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
        b->qs[j] = (int8_t)clampi(round_int(x[j] * id), -127, 127);
        sum += b->qs[j];
    }
    b->d = f32_to_f16(d);
    b->s = f32_to_f16(f16_to_f32(b->d) * sum);
}

void quant_iq4_nl(const float* x, block_iq4_nl* b) {
    int q[32];
    float d = as_f16(search_iq4(x, 32, q));
    b->d = f32_to_f16(d);
    for (int j = 0; j < 32; ++j) q[j] = nearest_iq4(d != 0 ? x[j] / d : 0);
    for (int j = 0; j < 16; ++j) b->qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
}

// ---- K-quants ----

// Per-sub-block affine fits of a 256-element super-block, with the scales and mins then
// quantized to `levels` steps under one fp16 d and dmin. Writes the quantized scale/min codes and
// the final q values re-rounded against the stored scales.
void kquant_affine(const float* x, int sub, int nmax, int levels, float* d_out, float* dmin_out,
                   int* sc, int* mn, int* q) {
    const int nsub = QK_K / sub;
    float scale[16], minv[16];
    for (int s = 0; s < nsub; ++s) {
        float d, m;
        search_affine(x + s * sub, sub, nmax, true, q + s * sub, &d, &m);
        scale[s] = d;
        minv[s] = -m;
    }
    float smax = 0, mmax = 0;
    for (int s = 0; s < nsub; ++s) smax = std::max(smax, scale[s]), mmax = std::max(mmax, minv[s]);
    float d = as_f16(smax / levels), dmin = as_f16(mmax / levels);
    for (int s = 0; s < nsub; ++s) {
        sc[s] = d > 0 ? clampi(round_int(scale[s] / d), 0, levels) : 0;
        mn[s] = dmin > 0 ? clampi(round_int(minv[s] / dmin), 0, levels) : 0;
        float ds = d * sc[s], ms = dmin * mn[s];
        for (int i = 0; i < sub; ++i) q[s * sub + i] = requant(x[s * sub + i] + ms, ds, 0, nmax);
    }
    *d_out = d;
    *dmin_out = dmin;
}

void pack_scales_k4(const int* sc, const int* mn, uint8_t* out) {
    for (int j = 0; j < 4; ++j) {
        out[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        out[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        out[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | (mn[j + 4] & 0xF) << 4);
    }
}

void quant_q4_K(const float* x, block_q4_K* b) {
    int sc[8], mn[8], q[QK_K];
    float d, dmin;
    kquant_affine(x, 32, 15, 63, &d, &dmin, sc, mn, q);
    b->d = f32_to_f16(d);
    b->dmin = f32_to_f16(dmin);
    pack_scales_k4(sc, mn, b->scales);
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l)
            b->qs[32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
}

void quant_q5_K(const float* x, block_q5_K* b) {
    int sc[8], mn[8], q[QK_K];
    float d, dmin;
    kquant_affine(x, 32, 31, 63, &d, &dmin, sc, mn, q);
    b->d = f32_to_f16(d);
    b->dmin = f32_to_f16(dmin);
    pack_scales_k4(sc, mn, b->scales);
    std::memset(b->qh, 0, sizeof b->qh);
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            int q0 = q[64 * c + l], q1 = q[64 * c + 32 + l];
            b->qs[32 * c + l] = (uint8_t)((q0 & 0xF) | (q1 & 0xF) << 4);
            b->qh[l] |= (uint8_t)((q0 >> 4) << (2 * c) | (q1 >> 4) << (2 * c + 1));
        }
}

void quant_q2_K(const float* x, block_q2_K* b) {
    int sc[16], mn[16], q[QK_K];
    float d, dmin;
    kquant_affine(x, 16, 3, 15, &d, &dmin, sc, mn, q);
    b->d = f32_to_f16(d);
    b->dmin = f32_to_f16(dmin);
    for (int i = 0; i < 16; ++i) b->scales[i] = (uint8_t)(sc[i] | mn[i] << 4);
    std::memset(b->qs, 0, sizeof b->qs);
    for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 32; ++l)
                b->qs[32 * h + l] |= (uint8_t)(q[128 * h + 32 * j + l] << (2 * j));
}

// Symmetric sub-block fits of a super-block, sub-block scales then quantized to signed integers
// in [-levels, levels - 1] under one scale (the largest magnitude maps onto -levels).
float kquant_symmetric(const float* x, int sub, int qmin, int qmax, int levels, int* sc, int* q) {
    const int nsub = QK_K / sub;
    float scale[16], smax = 0, amax = 0;
    for (int s = 0; s < nsub; ++s) {
        scale[s] = search_symmetric(x + s * sub, sub, qmin, qmax, q + s * sub);
        if (std::fabs(scale[s]) > amax) amax = std::fabs(scale[s]), smax = scale[s];
    }
    float d = as_f16(amax > 0 ? -smax / levels : 0);
    for (int s = 0; s < nsub; ++s) {
        sc[s] = d != 0 ? clampi(round_int(scale[s] / d), -levels, levels - 1) : 0;
        float ds = d * sc[s];
        for (int i = 0; i < sub; ++i) q[s * sub + i] = requant(x[s * sub + i], ds, qmin, qmax);
    }
    return d;
}

void quant_q6_K(const float* x, block_q6_K* b) {
    int sc[16], q[QK_K];
    float d = kquant_symmetric(x, 16, -32, 31, 128, sc, q);
    b->d = f32_to_f16(d);
    for (int i = 0; i < 16; ++i) b->scales[i] = (int8_t)sc[i];
    for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l) {
            int v[4];
            for (int k = 0; k < 4; ++k) v[k] = q[128 * h + l + 32 * k] + 32;
            b->ql[64 * h + l] = (uint8_t)((v[0] & 0xF) | (v[2] & 0xF) << 4);
            b->ql[64 * h + l + 32] = (uint8_t)((v[1] & 0xF) | (v[3] & 0xF) << 4);
            b->qh[32 * h + l] =
                (uint8_t)((v[0] >> 4) | (v[1] >> 4) << 2 | (v[2] >> 4) << 4 | (v[3] >> 4) << 6);
        }
}

void quant_q3_K(const float* x, block_q3_K* b) {
    int sc[16], q[QK_K];
    float d = kquant_symmetric(x, 16, -4, 3, 32, sc, q);
    b->d = f32_to_f16(d);
    std::memset(b->scales, 0, sizeof b->scales);
    for (int i = 0; i < 16; ++i) {
        int v = sc[i] + 32;
        if (i < 8)
            b->scales[i] |= (uint8_t)(v & 0xF);
        else
            b->scales[i - 8] |= (uint8_t)((v & 0xF) << 4);
        b->scales[8 + i % 4] |= (uint8_t)((v >> 4) << (2 * (i / 4)));
    }
    std::memset(b->hmask, 0, sizeof b->hmask);
    std::memset(b->qs, 0, sizeof b->qs);
    for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 32; ++l) {
                int v = q[128 * h + 32 * j + l] + 4;  // 0..7: bit 2 set means "no -4"
                b->qs[32 * h + l] |= (uint8_t)((v & 3) << (2 * j));
                if (v & 4) b->hmask[l] |= (uint8_t)(1 << (4 * h + j));
            }
}

void quant_iq4_xs(const float* x, block_iq4_xs* b) {
    float scale[8], amax = 0, smax = 0;
    int q[QK_K];
    for (int ib = 0; ib < 8; ++ib) {
        scale[ib] = search_iq4(x + 32 * ib, 32, q + 32 * ib);
        if (std::fabs(scale[ib]) > amax) amax = std::fabs(scale[ib]), smax = scale[ib];
    }
    float d = as_f16(amax > 0 ? -smax / 32 : 0);
    b->d = f32_to_f16(d);
    b->scales_h = 0;
    std::memset(b->scales_l, 0, sizeof b->scales_l);
    for (int ib = 0; ib < 8; ++ib) {
        int ls = d != 0 ? clampi(round_int(scale[ib] / d), -32, 31) : 0;
        float dl = d * ls;
        for (int j = 0; j < 32; ++j)
            q[32 * ib + j] = nearest_iq4(dl != 0 ? x[32 * ib + j] / dl : 0);
        int v = ls + 32;
        b->scales_l[ib / 2] |= (uint8_t)((v & 0xF) << (4 * (ib % 2)));
        b->scales_h |= (uint16_t)((v >> 4) << (2 * ib));
        for (int j = 0; j < 16; ++j)
            b->qs[16 * ib + j] = (uint8_t)(q[32 * ib + j] | q[32 * ib + j + 16] << 4);
    }
}

template <typename Block>
size_t each_block(void (*f)(const float*, Block*), const float* src, void* dst, int64_t n,
                  int64_t qk) {
    Block* b = static_cast<Block*>(dst);
    for (int64_t i = 0; i < n / qk; ++i) f(src + i * qk, b + i);
    return (size_t)(n / qk) * sizeof(Block);
}

}  // namespace

void quantize_row_q8_K(const float* x, void* dst, int64_t n) {
    block_q8_K* b = static_cast<block_q8_K*>(dst);
    for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
        float amax = 0;
        for (int j = 0; j < QK_K; ++j) amax = std::max(amax, std::fabs(x[j]));
        float d = amax / 127;
        float id = d != 0 ? 1.0f / d : 0;
        b[i].d = d;
        for (int j = 0; j < QK_K; ++j) b[i].qs[j] = (int8_t)clampi(round_int(x[j] * id), -127, 127);
        for (int s = 0; s < 16; ++s) {
            int sum = 0;
            for (int j = 0; j < 16; ++j) sum += b[i].qs[16 * s + j];
            b[i].bsums[s] = (int16_t)sum;
        }
    }
}

// Every type the library reads it also writes (quant.h promises one list), so the supported types
// are listed once, in can_dequantize; quantize() below has a case for each of them.
bool can_quantize(QType t) {
    return can_dequantize(t);
}

size_t quantize(QType t, const float* src, void* dst, int64_t n) {
    DL_ASSERT(row_ok(t, n));
    switch (t) {
        case QType::F32:
            std::memcpy(dst, src, (size_t)n * 4);
            return (size_t)n * 4;
        case QType::F16: {
            uint16_t* d = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
            return (size_t)n * 2;
        }
        case QType::BF16: {
            uint16_t* d = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
            return (size_t)n * 2;
        }
        case QType::Q4_0:
            return each_block(quant_q4_0, src, dst, n, 32);
        case QType::Q4_1:
            return each_block(quant_q4_1, src, dst, n, 32);
        case QType::Q5_0:
            return each_block(quant_q5_0, src, dst, n, 32);
        case QType::Q5_1:
            return each_block(quant_q5_1, src, dst, n, 32);
        case QType::Q8_0:
            return each_block(quant_q8_0, src, dst, n, 32);
        case QType::Q8_1:
            return each_block(quant_q8_1, src, dst, n, 32);
        case QType::Q2_K:
            return each_block(quant_q2_K, src, dst, n, QK_K);
        case QType::Q3_K:
            return each_block(quant_q3_K, src, dst, n, QK_K);
        case QType::Q4_K:
            return each_block(quant_q4_K, src, dst, n, QK_K);
        case QType::Q5_K:
            return each_block(quant_q5_K, src, dst, n, QK_K);
        case QType::Q6_K:
            return each_block(quant_q6_K, src, dst, n, QK_K);
        case QType::Q8_K:
            quantize_row_q8_K(src, dst, n);
            return row_size(t, n);
        case QType::IQ4_NL:
            return each_block(quant_iq4_nl, src, dst, n, 32);
        case QType::IQ4_XS:
            return each_block(quant_iq4_xs, src, dst, n, QK_K);
        default:
            break;
    }
    fail("cannot quantize tensors to type {}", qtype_name(t));
}

}  // namespace dl::quant
