// Half and bfloat16 conversions against exhaustive round trips and known values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/half.h"

namespace dl {

TEST(Half, EveryHalfRoundTrips) {
    for (uint32_t h = 0; h < 65536; ++h) {
        float f = f16_to_f32((uint16_t)h);
        if (std::isnan(f)) {
            EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
            continue;
        }
        EXPECT_EQ(f32_to_f16(f), (uint16_t)h) << "h=" << h;
    }
}

TEST(Half, KnownValues) {
    EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
    EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
    EXPECT_EQ(f32_to_f16(65504.f), 0x7bff);
    EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);
    EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
    // 1 + 2^-11 is halfway between 1 and the next half: ties to even (1.0)
    EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
    EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
}

TEST(BFloat16, RoundsToNearestEven) {
    EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
    uint32_t bits = 0x3f808000;  // exactly halfway, lower is even
    float f;
    std::memcpy(&f, &bits, 4);
    EXPECT_EQ(f32_to_bf16(f), 0x3f80);
    bits = 0x3f818000;  // halfway, rounds up to even
    std::memcpy(&f, &bits, 4);
    EXPECT_EQ(f32_to_bf16(f), 0x3f82);
}

}  // namespace dl
