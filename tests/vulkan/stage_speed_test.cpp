// What a stage of the decode token command costs whatever its work (run only with
// DELTALLM_VK_SPEED=1, as the other speed reports): one one-workgroup dispatch followed by a
// pipeline barrier, against the same dispatches recorded eight to a stage. The token command of
// a 9B is about 170 such stages; their fixed cost bounds how close decode can come to the
// weight-bandwidth floor.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "vk_test.h"

namespace dl::vk {
namespace {

TEST(StageSpeed, Report) {
    VK_SPEED_DEVICE();
    // Eight RMSNorms of 256 values, one workgroup each, into eight distinct rows.
    constexpr uint32_t n = 256, kRows = 8;
    Buffer x = test::to_device(dev, test::randn((size_t)n * kRows, 3));
    Buffer w = test::to_device(dev, test::randn(n, 5));
    Buffer y = test::poisoned(dev, (size_t)n * kRows);
    auto norm = [&](CommandList& cl, uint32_t row) {
        K.rms_norm(cl, view(w), view(x), row * n, n, view(y), row * n, n, n, 1, 1e-6f);
    };
    const uint32_t runs = dev.features().cpu ? 8 : 400;
    // One dispatch a stage (the barrier after each run is device_ms_per_run's).
    const double one = test::device_ms_per_run(dev, runs, [&](CommandList& cl) { norm(cl, 0); });
    // Eight independent dispatches a stage.
    const double eight = test::device_ms_per_run(dev, runs, [&](CommandList& cl) {
        for (uint32_t r = 0; r < kRows; ++r) norm(cl, r);
    });
    const std::vector<float> out = test::from_device<float>(dev, y, (size_t)n * kRows);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_TRUE(std::isfinite(out[i])) << "value " << i;
    fmt::print("a stage of one one-workgroup dispatch: {:.2f} us\n", one * 1e3);
    fmt::print(
        "a stage of eight such dispatches: {:.2f} us ({:.2f} us a dispatch past the first)\n",
        eight * 1e3, (eight - one) * 1e3 / (kRows - 1));
}

}  // namespace
}  // namespace dl::vk
