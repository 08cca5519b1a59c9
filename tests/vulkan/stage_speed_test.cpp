// What a stage of the decode token command costs whatever its work (run only with
// DELTALLM_VK_SPEED=1, as the other speed reports): one one-workgroup dispatch followed by a
// pipeline barrier, against the same dispatches recorded eight to a stage. The token command of
// a 9B is about 170 such stages; their fixed cost bounds how close decode can come to the
// weight-bandwidth floor.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

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

// What a stage that only streams N bytes costs: the read probe (Kernels::stream_read, the
// shape bench's floor uses) over 1 MiB .. 512 MiB, a barrier after each run as between the token
// command's stages, each run reading bytes no earlier run of its size read (so a stage smaller
// than the device's cache still reads memory, as decode's GEMVs do). The fit t = a + N / rate
// gives a stage's fixed cost a and the rate past it: a token of S stages that read B bytes
// cannot take less than S · a + B / rate however its GEMVs are written. The workgroup folds of
// each size's last run are checked against the host's, so a probe that skipped loads fails.
TEST(StageSpeed, Stream) {
    VK_SPEED_DEVICE();
    const Features& f = dev.features();
    constexpr uint64_t MiB = 1ull << 20, chunk = 16 * MiB;
    const uint64_t pool = f.cpu ? 64 * MiB : 2048 * MiB;
    std::mt19937 rng(11);
    std::vector<uint32_t> words(chunk / 4);
    for (auto& w : words) w = rng();
    Buffer src = dev.create_buffer(pool, MemoryKind::device);
    for (uint64_t off = 0; off < pool; off += chunk) dev.upload(src, off, words.data(), chunk);
    const std::vector<uint64_t> sizes =
        f.cpu ? std::vector<uint64_t>{MiB, 4 * MiB, 16 * MiB}
              : std::vector<uint64_t>{MiB,      2 * MiB,  4 * MiB,   8 * MiB,  16 * MiB,
                                      32 * MiB, 64 * MiB, 128 * MiB, 512 * MiB};
    const uint64_t align = std::max<uint64_t>(f.min_storage_offset_alignment, 256);
    double sn = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (uint64_t size : sizes) {
        if (size > f.max_storage_buffer_range || 2 * size > pool) continue;
        const uint32_t groups = K.stream_read_groups(size);
        Buffer out = dev.create_buffer((uint64_t)groups * 4, MemoryKind::host);
        const uint32_t runs = f.cpu ? 2 : (uint32_t)std::clamp<uint64_t>(4096 * MiB / size, 8, 200);
        // Run i reads at (i · size) mod (pool - size), rounded down to the offset alignment.
        const uint64_t span = pool - size;
        auto offset = [&](uint32_t i) { return (i * size) % span / align * align; };
        uint32_t recorded = 0;
        const double ms = test::device_ms_per_run(dev, runs, [&](CommandList& cl) {
            K.stream_read(cl, view(src, offset(recorded++), size), size, view(out), 0);
        });
        ASSERT_GT(ms, 0.0);
        const double us = ms * 1e3, mib = double(size) / MiB;
        fmt::print("a stage reading {:4.0f} MiB: {:8.2f} us ({:.1f} GB/s)\n", mib, us,
                   size / (ms * 1e6));
        sn += 1, sx += mib, sy += us, sxx += mib * mib, sxy += mib * us;
        // out holds the last run's folds.
        const auto* o = static_cast<const uint32_t*>(out.mapped());
        ASSERT_EQ(size / 4 % groups, 0u);
        const uint64_t first = offset(runs - 1) / 4, per_group = size / 4 / groups;
        for (uint32_t g = 0; g < groups; ++g) {
            uint32_t want = 0;
            for (uint64_t w = g * per_group; w < (g + 1) * per_group; ++w)
                want ^= words[(first + w) % words.size()];
            ASSERT_EQ(o[g], want) << "size " << size << ", group " << g;
        }
    }
    ASSERT_GE(sn, 2.0);
    const double slope = (sn * sxy - sx * sy) / (sn * sxx - sx * sx);  // us a MiB
    const double fixed = (sy - slope * sx) / sn;
    fmt::print("fit: a stage costs {:.2f} us plus its bytes at {:.1f} GB/s\n", fixed,
               MiB / (slope * 1e3));
}

}  // namespace
}  // namespace dl::vk
