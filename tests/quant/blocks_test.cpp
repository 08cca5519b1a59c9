// Block layouts checked against the published format, independently of our own quantizer: each
// block is written byte by byte at the offsets the format defines, and the expected floats are
// worked out by hand (in the comments) from the dequantization formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "quant/blocks.h"
#include "quant/quant.h"

namespace dl::quant {
namespace {

void put16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
    b[at] = (uint8_t)(v & 0xFF);
    b[at + 1] = (uint8_t)(v >> 8);
}

std::vector<float> decode(QType t, const std::vector<uint8_t>& bytes) {
    EXPECT_EQ(bytes.size(), type_size(t));
    std::vector<float> y(block_size(t), NAN);
    dequantize(t, bytes.data(), y.data(), block_size(t));
    return y;
}

constexpr uint16_t kHalf = 0x3800, kQuarter = 0x3400, kOne = 0x3C00, kTwo = 0x4000;

TEST(Blocks, Q4_0) {
    // [d:2][qs:16]; d = 0.25, qs[j] = j | (15 - j) << 4
    std::vector<uint8_t> b(18);
    put16(b, 0, kQuarter);
    for (int j = 0; j < 16; ++j) b[2 + j] = (uint8_t)(j | (15 - j) << 4);
    auto y = decode(QType::Q4_0, b);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(y[j], 0.25f * (j - 8));
        EXPECT_EQ(y[j + 16], 0.25f * (7 - j));
    }
    EXPECT_EQ(y[0], -2.0f);
    EXPECT_EQ(y[31], -2.0f);
}

TEST(Blocks, Q4_1) {
    // [d:2][m:2][qs:16]; d = 0.5, m = -1: y = 0.5 q - 1
    std::vector<uint8_t> b(20);
    put16(b, 0, kHalf);
    put16(b, 2, 0xBC00);  // -1
    b[4] = 0xF3;          // y[0] = 0.5*3 - 1 = 0.5, y[16] = 0.5*15 - 1 = 6.5
    auto y = decode(QType::Q4_1, b);
    EXPECT_EQ(y[0], 0.5f);
    EXPECT_EQ(y[16], 6.5f);
    EXPECT_EQ(y[1], -1.0f);
}

TEST(Blocks, Q5_0) {
    // [d:2][qh:4][qs:16]; d = 1, qh = 0x80000001 (bit 0 -> y[0], bit 31 -> y[31])
    std::vector<uint8_t> b(22);
    put16(b, 0, kOne);
    b[2] = 0x01;
    b[5] = 0x80;
    b[6 + 0] = 0x21;   // y[0] = (1 | 16) - 16 = 1, y[16] = 2 - 16 = -14
    b[6 + 15] = 0xF0;  // y[15] = 0 - 16 = -16, y[31] = (15 | 16) - 16 = 15
    auto y = decode(QType::Q5_0, b);
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[16], -14.0f);
    EXPECT_EQ(y[15], -16.0f);
    EXPECT_EQ(y[31], 15.0f);
    EXPECT_EQ(y[7], -16.0f);
}

TEST(Blocks, Q5_1) {
    // [d:2][m:2][qh:4][qs:16]; d = 0.5, m = 2; qh bit 17 -> y[17]
    std::vector<uint8_t> b(24);
    put16(b, 0, kHalf);
    put16(b, 2, kTwo);
    b[4 + 2] = 0x02;  // bit 17
    b[8 + 1] = 0x40;  // y[1] = 0 -> 2; y[17] = (4 | 16) * 0.5 + 2 = 12
    auto y = decode(QType::Q5_1, b);
    EXPECT_EQ(y[1], 2.0f);
    EXPECT_EQ(y[17], 12.0f);
}

TEST(Blocks, Q8_0) {
    // [d:2][qs:32 int8]; d = 0.5, qs[j] = j - 16
    std::vector<uint8_t> b(34);
    put16(b, 0, kHalf);
    for (int j = 0; j < 32; ++j) b[2 + j] = (uint8_t)(int8_t)(j - 16);
    auto y = decode(QType::Q8_0, b);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * (j - 16));
}

TEST(Blocks, Q4_K) {
    // [d:2][dmin:2][scales:12][qs:128]; d = 0.5, dmin = 0.25.
    // Sub-block scales sc = {1,2,3,4,17,33,50,63}, mins m = {0,1,2,3,20,40,5,63}, packed by hand:
    //   bytes 0-3:  sc[0..3] | (sc[4..7] >> 4) << 6  = 0x41 0x82 0xC3 0xC4
    //   bytes 4-7:  m[0..3]  | (m[4..7] >> 4) << 6   = 0x40 0x81 0x02 0xC3
    //   bytes 8-11: (sc[4..7] & 15) | (m[4..7] & 15) << 4 = 0x41 0x81 0x52 0xFF
    const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63}, m[8] = {0, 1, 2, 3, 20, 40, 5, 63};
    std::vector<uint8_t> b(144);
    put16(b, 0, kHalf);
    put16(b, 2, kQuarter);
    const uint8_t scales[12] = {0x41, 0x82, 0xC3, 0xC4, 0x40, 0x81,
                                0x02, 0xC3, 0x41, 0x81, 0x52, 0xFF};
    std::memcpy(&b[4], scales, 12);
    for (int i = 0; i < 128; ++i) b[16 + i] = (uint8_t)(i * 7);
    auto y = decode(QType::Q4_K, b);
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            uint8_t q = (uint8_t)((32 * c + l) * 7);
            EXPECT_EQ(y[64 * c + l], 0.5f * sc[2 * c] * (q & 15) - 0.25f * m[2 * c]);
            EXPECT_EQ(y[64 * c + 32 + l], 0.5f * sc[2 * c + 1] * (q >> 4) - 0.25f * m[2 * c + 1]);
        }
    EXPECT_EQ(y[0], 0.0f);       // q 0, min 0
    EXPECT_EQ(y[32], -0.25f);    // q 0 (0 >> 4), min 1
    EXPECT_EQ(y[133], 20.5f);    // qs[69] = 0xE3: 0.5*17*3 - 0.25*20
    EXPECT_EQ(y[255], 204.75f);  // qs[127] = 0x79: 0.5*63*7 - 0.25*63
}

TEST(Blocks, Q5_K) {
    // [d:2][dmin:2][scales:12][qh:32][qs:128]; d = dmin = 1, every sc = 1, m = 0.
    std::vector<uint8_t> b(176);
    put16(b, 0, kOne);
    put16(b, 2, kOne);
    for (int j = 0; j < 4; ++j) b[4 + j] = 1, b[4 + 8 + j] = 0x01;
    b[16 + 3] = 0x81;       // qh[3]: bit 0 -> y[3] += 16; bit 7 (chunk 3, high) -> y[227] += 16
    b[48 + 32 + 4] = 0x5A;  // qs[36]: y[64 + 4] = 10, y[96 + 4] = 5
    auto y = decode(QType::Q5_K, b);
    EXPECT_EQ(y[3], 16.0f);
    EXPECT_EQ(y[227], 16.0f);
    EXPECT_EQ(y[68], 10.0f);
    EXPECT_EQ(y[100], 5.0f);
    float total = 0;
    for (float v : y) total += v;
    EXPECT_EQ(total, 47.0f);  // nothing else is set
}

TEST(Blocks, Q6_K) {
    // [ql:128][qh:64][scales:16 int8][d:2]; d = 1, scales[i] = i - 8, all q = 0 (value -32) except:
    std::vector<uint8_t> b(210);
    for (int i = 0; i < 16; ++i) b[192 + i] = (uint8_t)(int8_t)(i - 8);
    put16(b, 208, kOne);
    b[5] = 0x3A;        // ql[5]
    b[128 + 5] = 0xE4;  // qh[5] = 11 10 01 00
    // y[5]   = q (10 | 0 << 4) = 10  -> (10 - 32) * sc[0] = -22 * -8 = 176
    // y[37]  = q (0 | 1 << 4) = 16   -> (16 - 32) * sc[2] = -16 * -6 = 96
    // y[69]  = q (3 | 2 << 4) = 35   -> 3 * sc[4] = 3 * -4 = -12
    // y[101] = q (0 | 3 << 4) = 48   -> 16 * sc[6] = 16 * -2 = -32
    b[64 + 40] = 0xF0;       // ql[104] = second half, l = 8, the +32 byte
    b[128 + 32 + 8] = 0x40;  // qh[40]: bits 6-7 = 1
    // y[232] = q (15 | 1 << 4) = 31 -> -1 * sc[8 + 0 + 6] = -6
    // y[168] = q (0 | 0) = 0        -> -32 * sc[8 + 0 + 2] = -64
    auto y = decode(QType::Q6_K, b);
    for (int i = 0; i < 256; ++i) {
        int h = i / 128, r = i % 128, k = r / 32, l = r % 32;
        float expect = -32.0f * ((8 * h + l / 16 + 2 * k) - 8);
        if (i == 5) expect = 176;
        if (i == 37) expect = 96;
        if (i == 69) expect = -12;
        if (i == 101) expect = -32;
        if (i == 232) expect = -6;
        if (i == 168) expect = -64;
        EXPECT_EQ(y[i], expect) << "element " << i;
    }
}

TEST(Blocks, Q3_K) {
    // [hmask:32][qs:64][scales:12][d:2]; d = 1.
    // scales[0] = 0x21: low nibbles of sub-blocks 0 (1) and 8 (2); scales[8] = 0x22: high bits
    // of sub-blocks 0 (2) and 8 (2): sc0 = 33 - 32 = 1, sc8 = 34 - 32 = 2, every other sc = -32.
    std::vector<uint8_t> b(110);
    for (int i = 0; i < 32; ++i) b[i] = 0xFF;  // every high bit set: no -4
    b[96] = 0x21;
    b[96 + 8] = 0x22;
    put16(b, 108, kOne);
    b[32 + 0] = 0xE7;   // qs[0]: j=0 -> 3, j=1 -> 1, j=2 -> 2, j=3 -> 3
    b[0] = 0xFD;        // hmask[0] bit 1 clear: y[32] gets q - 4
    b[32 + 34] = 0x02;  // qs[34] (h = 1, l = 2), j = 0: q = 2
    b[2] = 0xEF;        // hmask[2] bit 4 (h = 1, j = 0) clear: y[130] q = 2 - 4 = -2
    auto y = decode(QType::Q3_K, b);
    EXPECT_EQ(y[0], 3.0f);     // 3 * sc0
    EXPECT_EQ(y[32], 96.0f);   // (1 - 4) * -32 (sub-block 2)
    EXPECT_EQ(y[64], -64.0f);  // 2 * -32 (sub-block 4)
    EXPECT_EQ(y[96], -96.0f);  // 3 * -32 (sub-block 6)
    EXPECT_EQ(y[130], -4.0f);  // -2 * sc8
    int nonzero = 0;
    for (float v : y) nonzero += v != 0;
    EXPECT_EQ(nonzero, 5);
}

TEST(Blocks, Q2_K) {
    // [scales:16][qs:64][d:2][dmin:2]; d = 1, dmin = 0.5; scales[i] = i | (15 - i) << 4.
    std::vector<uint8_t> b(84);
    for (int i = 0; i < 16; ++i) b[i] = (uint8_t)(i | (15 - i) << 4);
    put16(b, 80, kOne);
    put16(b, 82, kHalf);
    b[16 + 0] = 0xE4;   // qs[0] = 11 10 01 00
    b[16 + 49] = 0x03;  // qs[32 + 17]: h = 1, j = 0, l = 17 -> sub-block 9, q = 3
    auto y = decode(QType::Q2_K, b);
    EXPECT_EQ(y[0], -7.5f);    // 0 * 0 - 0.5 * 15
    EXPECT_EQ(y[32], -4.5f);   // sub 2: 2 * 1 - 0.5 * 13
    EXPECT_EQ(y[64], 2.5f);    // sub 4: 4 * 2 - 0.5 * 11
    EXPECT_EQ(y[96], 13.5f);   // sub 6: 6 * 3 - 0.5 * 9
    EXPECT_EQ(y[145], 24.0f);  // sub 9: 9 * 3 - 0.5 * 6
    EXPECT_EQ(y[20], -7.0f);   // sub 1: -0.5 * 14
}

TEST(Blocks, IQ4_NL) {
    // [d:2][qs:16]; d = 2, qs[j] = j | (15 - j) << 4: y[j] = 2 * table[j], y[j+16] = 2 * table[15 -
    // j]
    std::vector<uint8_t> b(18);
    put16(b, 0, kTwo);
    for (int j = 0; j < 16; ++j) b[2 + j] = (uint8_t)(j | (15 - j) << 4);
    auto y = decode(QType::IQ4_NL, b);
    const int table[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                           1,    13,   25,  38,  53,  69,  89,  113};
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(y[j], 2.0f * table[j]);
        EXPECT_EQ(y[j + 16], 2.0f * table[15 - j]);
    }
    EXPECT_EQ(y[0], -254.0f);
    EXPECT_EQ(y[16], 226.0f);
}

TEST(Blocks, IQ4_XS) {
    // [d:2][scales_h:2][scales_l:4][qs:128]; d = 0.5.
    // scales_l = 21 43 65 87: low 4 bits of ls(ib) = ib + 1; scales_h = 0x8000: ls(7) += 2 << 4.
    std::vector<uint8_t> b(136);
    put16(b, 0, kHalf);
    put16(b, 2, 0x8000);
    b[4] = 0x21, b[5] = 0x43, b[6] = 0x65, b[7] = 0x87;
    b[8 + 16 * 7 + 3] = 0xF8;  // sub-block 7: y[227] = table[8] = 1, y[243] = table[15] = 113
    auto y = decode(QType::IQ4_XS, b);
    EXPECT_EQ(y[0], 1968.5f);    // 0.5 * (1 - 32) * -127
    EXPECT_EQ(y[227], 4.0f);     // 0.5 * (40 - 32) * 1
    EXPECT_EQ(y[243], 452.0f);   // 0.5 * 8 * 113
    EXPECT_EQ(y[224], -508.0f);  // 0.5 * 8 * -127
    EXPECT_EQ(y[100], 0.5f * (4 - 32) * -127);
}

TEST(Blocks, Q8_K) {
    // [d:4 float][qs:256][bsums:16 int16]: d = 0.5, qs[j] = j % 100 - 50.
    std::vector<uint8_t> b(292);
    float d = 0.5f;
    std::memcpy(&b[0], &d, 4);
    for (int j = 0; j < 256; ++j) b[4 + j] = (uint8_t)(int8_t)(j % 100 - 50);
    auto y = decode(QType::Q8_K, b);
    for (int j = 0; j < 256; ++j) EXPECT_EQ(y[j], 0.5f * (j % 100 - 50));
}

// Our own quantizer writes Q8_K bsums as the format defines them (the dot products rely on it).
TEST(Blocks, Q8_KBsums) {
    std::vector<float> x(512);
    for (int i = 0; i < 512; ++i) x[i] = (float)((i * 37) % 101 - 50);
    std::vector<block_q8_K> q(2);
    quantize(QType::Q8_K, x.data(), q.data(), 512);
    for (const auto& b : q)
        for (int s = 0; s < 16; ++s) {
            int sum = 0;
            for (int j = 0; j < 16; ++j) sum += b.qs[16 * s + j];
            EXPECT_EQ(b.bsums[s], sum);
        }
}

}  // namespace
}  // namespace dl::quant
