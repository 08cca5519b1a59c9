// Random block generators for the common GGUF types (f32, f16, bf16, q8_0, q4_0, q4_K, q5_K,
// q6_K). Each block gets random quants and a scale (and for K-quants sub-block scales and mins
// that centre the values), so decoding gives values of about the requested spread.
#include "convert/random_blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/threads.h"
#include "quant/blocks.h"

namespace dl::convert {

namespace {

struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
    uint64_t next() {  // splitmix64
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    float uniform() { return (float)(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
    int range(int lo, int hi) { return lo + (int)(next() % (uint64_t)(hi - lo + 1)); }
    void fill(uint8_t* p, size_t n) {
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            uint64_t v = next();
            std::memcpy(p + i, &v, 8);
        }
        if (i < n) {
            uint64_t v = next();
            std::memcpy(p + i, &v, n - i);
        }
    }
};

uint64_t row_seed(uint64_t seed, int64_t row) {
    return seed ^ ((uint64_t)row * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull);
}

// Packs eight 6-bit scales and mins the way get_scale_min_k4 unpacks them.
void pack_scale_min_k4(const uint8_t* sc, const uint8_t* m, uint8_t* q) {
    for (int j = 0; j < 4; ++j) {
        q[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        q[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        q[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
    }
}

// One row of ne0 elements.
void row_blocks(QType t, uint8_t* dst, int64_t ne0, float sigma, Rng& r) {
    using namespace quant;
    const int64_t nb = ne0 / block_size(t);
    switch (t) {
        case QType::F32: {
            float* f = reinterpret_cast<float*>(dst);
            const float a = sigma * std::sqrt(3.f);
            for (int64_t i = 0; i < ne0; ++i) f[i] = (2 * r.uniform() - 1) * a;
            return;
        }
        case QType::F16:
        case QType::BF16: {
            uint16_t* h = reinterpret_cast<uint16_t*>(dst);
            const float a = sigma * std::sqrt(3.f);
            for (int64_t i = 0; i < ne0; ++i) {
                float v = (2 * r.uniform() - 1) * a;
                h[i] = t == QType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
            }
            return;
        }
        case QType::Q8_0: {
            auto* b = reinterpret_cast<block_q8_0*>(dst);
            r.fill(dst, (size_t)nb * sizeof(block_q8_0));
            // int8 uniform over [-128, 127]: standard deviation about 73.9.
            const uint16_t d = f32_to_f16(sigma / 73.9f);
            for (int64_t i = 0; i < nb; ++i) b[i].d = d;
            return;
        }
        case QType::Q4_0: {
            auto* b = reinterpret_cast<block_q4_0*>(dst);
            r.fill(dst, (size_t)nb * sizeof(block_q4_0));
            const uint16_t d = f32_to_f16(sigma / 4.61f);  // nibble - 8: sd 4.61
            for (int64_t i = 0; i < nb; ++i) b[i].d = d;
            return;
        }
        case QType::Q4_K:
        case QType::Q5_K: {
            const bool five = t == QType::Q5_K;
            const size_t bs = five ? sizeof(block_q5_K) : sizeof(block_q4_K);
            r.fill(dst, (size_t)nb * bs);
            // y = d*sc*q - dmin*m with q uniform over 16 (32) levels: dmin*m = d*sc*mean(q)
            // centres each sub-block; sc in [8, 16] keeps m within 6 bits.
            const float q_mean = five ? 15.5f : 7.5f, q_sd = five ? 9.23f : 4.61f;
            const float ratio = five ? 4.f : 2.f;  // dmin / d
            const float d = sigma / (12.f * q_sd);
            for (int64_t i = 0; i < nb; ++i) {
                uint8_t* blk = dst + (size_t)i * bs;
                uint8_t sc[8], m[8];
                for (int j = 0; j < 8; ++j) {
                    sc[j] = (uint8_t)r.range(8, 16);
                    m[j] = (uint8_t)std::min(63, (int)std::lround(sc[j] * q_mean / ratio));
                }
                uint16_t hd = f32_to_f16(d), hm = f32_to_f16(d * ratio);
                std::memcpy(blk, &hd, 2);
                std::memcpy(blk + 2, &hm, 2);
                pack_scale_min_k4(sc, m, blk + 4);
            }
            return;
        }
        case QType::Q6_K: {
            auto* b = reinterpret_cast<block_q6_K*>(dst);
            r.fill(dst, (size_t)nb * sizeof(block_q6_K));
            const uint16_t d = f32_to_f16(sigma / (12.f * 18.5f));  // q - 32: sd 18.5
            for (int64_t i = 0; i < nb; ++i) {
                for (int j = 0; j < QK_K / 16; ++j) b[i].scales[j] = (int8_t)r.range(8, 16);
                b[i].d = d;
            }
            return;
        }
        default:
            return;
    }
}

bool direct(QType t) {
    switch (t) {
        case QType::F32:
        case QType::F16:
        case QType::BF16:
        case QType::Q8_0:
        case QType::Q4_0:
        case QType::Q4_K:
        case QType::Q5_K:
        case QType::Q6_K:
            return true;
        default:
            return false;
    }
}

}  // namespace

bool random_blocks(QType t, uint8_t* dst, int64_t rows, int64_t ne0, float sigma, uint64_t seed) {
    if (!direct(t) || ne0 % block_size(t) != 0) return false;
    const size_t rb = row_size(t, ne0);
    ThreadPool::global().for_range(
        rows,
        [&](int64_t b, int64_t e, int) {
            for (int64_t row = b; row < e; ++row) {
                Rng r(row_seed(seed, row));
                row_blocks(t, dst + (size_t)row * rb, ne0, sigma, r);
            }
        },
        std::max<int64_t>(1, 4096 / std::max<int64_t>(1, ne0 / 256)));
    return true;
}

void random_floats(float* dst, int64_t n, float mean, float sigma, uint64_t seed) {
    Rng r(seed);
    const float a = sigma * std::sqrt(3.f);
    for (int64_t i = 0; i < n; ++i) dst[i] = mean + (2 * r.uniform() - 1) * a;
}

}  // namespace dl::convert
