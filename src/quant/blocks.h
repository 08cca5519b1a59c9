// Byte layouts of the GGUF block formats, exactly as files store them (little-endian, no
// padding). Every struct is static_assert-ed against the type table's bytes-per-block. The
// comments give the dequantization formula of each format: they are the reference for every
// implementation (CPU kernels here, Vulkan shaders elsewhere).
//
// Notation: y[i] is element i of the block (0-based), d/dmin/m are fp16 unless noted.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace dl::quant {

using half = uint16_t;  // IEEE binary16 bits (see core/half.h)

// Q4_0: 32 elements. y[j] = d * ((qs[j] & 0xF) - 8), y[j+16] = d * ((qs[j] >> 4) - 8), j < 16.
struct block_q4_0 {
    half d;
    uint8_t qs[QK4_0 / 2];
};

// Q4_1: 32 elements, with an offset. y[j] = d * (qs[j] & 0xF) + m, y[j+16] = d * (qs[j] >> 4) + m.
struct block_q4_1 {
    half d;
    half m;
    uint8_t qs[QK4_1 / 2];
};

// Q5_0: 32 elements. h = qh read as a little-endian uint32; bit j of h is the 5th bit of y[j]
// and bit j+16 that of y[j+16]: y[j] = d * (((qs[j] & 0xF) | ((h >> j & 1) << 4)) - 16),
// y[j+16] = d * (((qs[j] >> 4) | ((h >> (j+16) & 1) << 4)) - 16), j < 16.
struct block_q5_0 {
    half d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
};

// Q5_1: as Q5_0 without the -16 and plus m: y = d * q + m.
struct block_q5_1 {
    half d;
    half m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
};

// Q8_0: 32 elements. y[j] = d * qs[j].
struct block_q8_0 {
    half d;
    int8_t qs[QK8_0];
};

// Q8_1: activations for Q4_1/Q5_1. y[j] = d * qs[j]; s = d * sum(qs) (so the offset term
// m * sum(y) of the weight costs one multiply).
struct block_q8_1 {
    half d;
    half s;
    int8_t qs[QK8_1];
};

// ---- K-quants: super-blocks of 256 elements (QK_K) ----

// Q2_K: 16 sub-blocks of 16. scales[i]: low nibble = scale, high nibble = min of sub-block i.
// Element layout: for half h (0..1, 128 elements each, qs bytes 32h..32h+31), for shift
// s = 0,2,4,6 (j = s/2), sub-block i = 8h + 2j (+1 for the second 16 bytes):
//   y[128h + 32j + l] = d * (scales[i] & 0xF) * ((qs[32h + l] >> s) & 3) - dmin * (scales[i] >> 4)
// for l < 32 where i = 8h + 2j + (l >= 16).
struct block_q2_K {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    half d;
    half dmin;
};

// Q3_K: 16 sub-blocks of 16, 3-bit values q in [-4, 3], 6-bit signed scales (stored +32).
// Low 2 bits: qs as in Q2_K ((qs[32h + l] >> 2j) & 3). High bit: hmask[l] bit (4h + j); the value
// is low - 4 when that bit is CLEAR, low when it is set. Sub-block i's 6-bit scale sc:
//   low 4 bits  = i < 8 ? scales[i] & 0xF : scales[i - 8] >> 4
//   high 2 bits = (scales[8 + i % 4] >> (2 * (i / 4))) & 3
//   y[128h + 32j + l] = d * (sc - 32) * q, i = 8h + 2j + (l >= 16).
struct block_q3_K {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    half d;
};

// Q4_K: 8 sub-blocks of 32, 4-bit values, 6-bit scale sc and min m per sub-block packed in
// scales[12] (see get_scale_min_k4 below):
//   j < 4: sc = scales[j] & 63, m = scales[j + 4] & 63
//   j >= 4: sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4),
//           m  = (scales[j + 4] >> 4)  | ((scales[j] >> 6) << 4)
// Chunk c (0..3) covers y[64c .. 64c+63] using qs[32c .. 32c+31]:
//   y[64c + l] = d * sc(2c) * (qs[32c + l] & 0xF) - dmin * m(2c)
//   y[64c + 32 + l] = d * sc(2c+1) * (qs[32c + l] >> 4) - dmin * m(2c+1), l < 32.
struct block_q4_K {
    half d;
    half dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
};

// Q5_K: as Q4_K plus a 5th bit: for chunk c, bit 2c of qh[l] is the high bit of y[64c + l] and
// bit 2c+1 that of y[64c + 32 + l] (value = nibble + 16 * bit).
struct block_q5_K {
    half d;
    half dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
};

// Q6_K: 16 sub-blocks of 16, 6-bit values q in [-32, 31] (stored +32), int8 scales.
// Half h (0..1) covers y[128h ..] with ql[64h ..], qh[32h ..], scales[8h ..]; for l < 32:
//   q0 = (ql[64h + l]      & 0xF) | ((qh[32h + l] >> 0 & 3) << 4)  -> y[128h + l]
//   q1 = (ql[64h + l + 32] & 0xF) | ((qh[32h + l] >> 2 & 3) << 4)  -> y[128h + l + 32]
//   q2 = (ql[64h + l]      >> 4)  | ((qh[32h + l] >> 4 & 3) << 4)  -> y[128h + l + 64]
//   q3 = (ql[64h + l + 32] >> 4)  | ((qh[32h + l] >> 6 & 3) << 4)  -> y[128h + l + 96]
//   y[128h + l + 32k] = d * scales[8h + l/16 + 2k] * (qk - 32).
struct block_q6_K {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    half d;
};

// Q8_K: activations for the K-quants and IQ4_XS. d is a float; bsums[i] = sum of qs[16i..16i+15]
// (lets a dot product apply the weight's per-sub-block mins without touching qs).
struct block_q8_K {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
};

// ---- Non-linear 4-bit ----

// The 16 values IQ4_NL and IQ4_XS nibbles index.
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// IQ4_NL: 32 elements, nibbles laid out as Q4_0: y[j] = d * kIQ4NLValues[qs[j] & 0xF],
// y[j+16] = d * kIQ4NLValues[qs[j] >> 4].
struct block_iq4_nl {
    half d;
    uint8_t qs[QK4_NL / 2];
};

// IQ4_XS: 8 sub-blocks of 32, each laid out as an IQ4_NL block (qs[16 ib ..]) with a 6-bit scale
//   ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4)
//   y[32 ib + j] = d * (ls - 32) * kIQ4NLValues[nibble].
struct block_iq4_xs {
    half d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
};

static_assert(sizeof(block_q4_0) == 18);
static_assert(sizeof(block_q4_1) == 20);
static_assert(sizeof(block_q5_0) == 22);
static_assert(sizeof(block_q5_1) == 24);
static_assert(sizeof(block_q8_0) == 34);
static_assert(sizeof(block_q8_1) == 36);
static_assert(sizeof(block_q2_K) == 84);
static_assert(sizeof(block_q3_K) == 110);
static_assert(sizeof(block_q4_K) == 144);
static_assert(sizeof(block_q5_K) == 176);
static_assert(sizeof(block_q6_K) == 210);
static_assert(sizeof(block_q8_K) == 292);
static_assert(sizeof(block_iq4_nl) == 18);
static_assert(sizeof(block_iq4_xs) == 136);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// The 6-bit scale (0..63, still offset by 32) of sub-block i (0..15) of a Q3_K block.
inline int q3_K_scale(const uint8_t* scales, int i) {
    int lo = i < 8 ? scales[i] & 0xF : scales[i - 8] >> 4;
    int hi = (scales[8 + i % 4] >> (2 * (i / 4))) & 3;
    return lo | (hi << 4);
}

}  // namespace dl::quant
