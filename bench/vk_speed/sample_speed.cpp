// Speed report of the device's sampling over a 248k vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "speed.h"

namespace dl::vk {
namespace {

struct Params {
    float temperature;
    int32_t top_k;
    float top_p, min_p;
};

// Time of the choice over a 248k vocabulary (Qwen3.5's), greedy and top-k, in one workgroup
// and in two passes over chunks. The choices must agree.
TEST(SampleSpeed, Report) {
    VK_SPEED_DEVICE();
    const uint32_t n = 248320, runs = dev.features().cpu ? 2 : 50;
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.f, 3.f);
    std::vector<float> logits(n);
    for (float& x : logits) x = nd(rng);
    Buffer lb = test::to_device(dev, logits);
    Buffer scratch = dev.create_buffer(Kernels::sample_scratch_bytes(n), MemoryKind::device);
    for (const Params& c :
         {Params{0.f, 1, 1.f, 0.f}, Params{0.8f, 40, 0.95f, 0.05f}, Params{1.0f, 256, 1.f, 0.f}}) {
        std::vector<uint32_t> tokv(16, 0);
        tokv[3] = test::bits(c.temperature);
        tokv[4] = (uint32_t)c.top_k;
        tokv[5] = test::bits(c.top_p);
        tokv[6] = test::bits(c.min_p);
        tokv[7] = test::bits(0.37f);
        int32_t chosen[2] = {-1, -1};
        for (int chunked : {0, 1}) {
            Buffer tb = test::to_device(dev, tokv);
            const double ms = test::device_ms_per_run(dev, runs, [&](CommandList& cl) {
                K.sample(cl, view(lb), 0, n, view(tb), 2, 3, chunked ? view(scratch) : View{});
            });
            chosen[chunked] = (int32_t)test::from_device<uint32_t>(dev, tb, 16)[2];
            std::printf("SAMPLE %u logits, temperature %.1f top_k %d, %s: %.1f us\n", n,
                        c.temperature, c.top_k,
                        chunked ? "chunks of 4096 then candidates" : "one workgroup", ms * 1e3);
        }
        EXPECT_EQ(chosen[0], chosen[1]);
    }
}

}  // namespace
}  // namespace dl::vk
