// What a stage of the decode token command costs whatever its work: one one-workgroup dispatch
// followed by a pipeline barrier, against the same dispatches recorded eight to a stage. The token
// command of a 9B is about 170 such stages; their fixed cost bounds how close decode can come to
// the weight-bandwidth floor.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "speed.h"

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
        K.rms_norm(cl, {.w = view(w),
                        .x = view(x),
                        .x_off = row * n,
                        .x_stride = n,
                        .y = view(y),
                        .y_off = row * n,
                        .y_stride = n,
                        .n = n,
                        .nrows = 1,
                        .eps = 1e-6f});
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

// How short a chain of dependent stages can be, whatever carries it, with no weights to read:
// rounds of shaders/stage_chain.comp, each reading all of the vector the round before wrote (as
// a decode GEMV reads all of its x) on a grid that fills the device, handed on either by the
// end of a dispatch and a pipeline barrier (as the token command's stages are) or by counts and
// atomic polls inside one dispatch (as a persistent token kernel would). A decode token of S
// dependent stages cannot take less than S times the cheaper of the two, even with its weights
// read while it waits. Vectors of 1024, 4096 and 12288 values (the 0.8B's and 9B's hidden
// sizes, the 9B's FFN); the last vector of each form is checked against the host's rounds,
// and the one-dispatch form again with a workgroup made late each round.
TEST(StageSpeed, Chain) {
    VK_SPEED_DEVICE();
    const Features& f = dev.features();
    constexpr uint32_t rounds = 120;
    // Every workgroup of a dispatch that waits inside it must be running: one a multiprocessor
    // (or two, at 256 invocations) where the device says how many it has, one on a CPU device.
    std::vector<uint32_t> grids;
    if (f.cpu)
        grids = {1};
    else if (f.sm_count)
        grids = {f.sm_count, 2 * f.sm_count};
    else
        grids = {16};
    const uint32_t spin_limit = 1u << 24;
    for (uint32_t n : {1024u, 4096u, 12288u}) {
        std::vector<float> x0 = test::randn(n, 17 + n);
        // The host's rounds, in double: the device's sums differ from them only in rounding.
        for (uint32_t groups : grids) {
            std::vector<double> want(x0.begin(), x0.end());
            const uint32_t share = (n + groups - 1) / groups;
            for (uint32_t r = 0; r < rounds; ++r) {
                std::vector<double> next(n);
                for (uint32_t g = 0; g < groups; ++g) {
                    double s = 0;
                    for (uint32_t i = 0; i < n; ++i)
                        s += want[i] * (double(int((i * 7u + g * 13u) % 17u) - 8) / 8.0);
                    for (uint32_t j = g * share; j < std::min(n, (g + 1) * share); ++j)
                        next[j] = 0.5 * (want[j] + s / n);
                }
                want = std::move(next);
            }
            std::vector<float> xs((size_t)(rounds + 1) * n, std::nanf(""));
            std::copy(x0.begin(), x0.end(), xs.begin());
            Buffer x = test::to_device(dev, xs);
            Buffer sync = dev.create_buffer((rounds + 1) * 4, MemoryKind::device);
            dev.fill(sync, 0, (rounds + 1) * 4, 0);
            auto check = [&](const char* form) {
                const std::vector<float> got =
                    test::from_device<float>(dev, x, (size_t)(rounds + 1) * n);
                const std::vector<uint32_t> words =
                    test::from_device<uint32_t>(dev, sync, rounds + 1);
                ASSERT_EQ(words[rounds], 0u)
                    << form << ": a wait gave up (" << groups << " workgroups not all running)";
                for (uint32_t j = 0; j < n; ++j) {
                    const double g = got[(size_t)rounds * n + j];
                    ASSERT_TRUE(std::isfinite(g)) << form << ", value " << j;
                    ASSERT_NEAR(g, want[j], 1e-4 * (1 + std::abs(want[j])))
                        << form << ", value " << j << " of " << n << ", " << groups
                        << " workgroups";
                }
            };
            // Every vector but the first poisoned again before each form.
            auto poison = [&] {
                dev.upload(x, (uint64_t)n * 4, xs.data() + n, (uint64_t)rounds * n * 4);
            };
            // One round a dispatch, a barrier after each.
            uint32_t recorded = 0;
            const double split = test::device_ms_per_run(dev, rounds, [&](CommandList& cl) {
                K.stage_chain(cl, view(x), view(sync), n, recorded++ % rounds, 1, groups,
                              spin_limit, rounds);
            });
            check("a dispatch a round");
            // Every round in one dispatch.
            poison();
            const double whole = test::device_ms_per_run(dev, f.cpu ? 1 : 8, [&](CommandList& cl) {
                K.stage_chain(cl, view(x), view(sync), n, 0, rounds, groups, spin_limit, rounds);
            });
            check("one dispatch");
            // Once more untimed, one workgroup a round late on purpose: a handoff that did not
            // wait would read the poisoned values of the round's vector before they were written.
            poison();
            {
                CommandList cl(dev);
                cl.begin();
                // A short delay on a CPU device: lavapipe ended this dispatch's loops after about
                // 65 000 iterations in all (rounds past the 64th unwritten with a delay of 1000).
                K.stage_chain(cl, view(x), view(sync), n, 0, rounds, groups, spin_limit, rounds,
                              f.cpu ? 10 : 20000);
                cl.end();
                cl.submit_and_wait();
            }
            check("one dispatch, a workgroup late each round");
            fmt::print(
                "{:5} values, {:3} workgroups: a round {:.2f} us as a dispatch and a barrier, "
                "{:.2f} us handed on inside one dispatch\n",
                n, groups, split * 1e3, whole * 1e3 / rounds);
        }
    }
}

}  // namespace
}  // namespace dl::vk
