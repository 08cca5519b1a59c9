// The tiled Q4_K GEMV of the speed report (Kernels::gemv_tile, shaders/gemv_tile.comp): against
// the CPU's products over the same rounded x, outputs poisoned, every row checked, NaN failing;
// then (DELTALLM_VK_SPEED=1) its time beside the launcher's GEMV over the same bytes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>

#include "quant/quant.h"
#include "vk_test.h"

namespace dl::vk {
namespace {

using test::randn;

struct TileCase {
    QType type;
    uint32_t rows, cols, threads, tile;
    bool norm = false;    // x before an RMSNorm, normalized and rounded by the kernel
    uint32_t grid = 0;    // workgroups walking the tiles (0: a workgroup a tile)
    uint32_t ksplit = 1;  // workgroups a tile, the last to finish adding the parts in order
};

// The factor 1 / sqrt(mean(x²) + eps) the sums over x before an RMSNorm take.
float rms_factor(const std::vector<float>& x) {
    double ss = 0;
    for (float v : x) ss += (double)v * v;
    return (float)(1.0 / std::sqrt(ss / (double)x.size() + 1e-6));
}

// Each row's sum of its values deq times the rounded x, times factor, and the sum of the terms'
// magnitudes (for the tolerance).
struct Products {
    std::vector<double> ref, mag;
};
Products products(const std::vector<float>& deq, uint32_t rows, uint32_t cols,
                  const std::vector<float>& x, double factor) {
    Products p{std::vector<double>(rows), std::vector<double>(rows)};
    for (uint32_t r = 0; r < rows; ++r)
        for (uint32_t i = 0; i < cols; ++i) {
            const double v = (double)deq[(size_t)r * cols + i] * x[i] * factor;
            p.ref[r] += v;
            p.mag[r] += std::fabs(v);
        }
    return p;
}

class GemvTile : public ::testing::TestWithParam<TileCase> {};

// Rows past the last whole tile, column runs more than a workgroup's slots (each slot then
// takes several), write and accumulate.
TEST_P(GemvTile, MatchesTheProductsOverRoundedX) {
    VK_TEST_DEVICE();
    const auto [t, rows, cols, threads, tile, norm, grid, ksplit] = GetParam();
    if (!K.gemv_tile_supported(t)) GTEST_SKIP() << "no integer dot products on this device";
    auto [wq, deq] =
        test::quantize_rows(t, randn((size_t)rows * cols, 5 + rows), rows, cols, false);
    Buffer w = test::to_device(dev, Kernels::tile_rows(t, wq.data(), rows, cols, tile));
    const std::vector<float> x = randn(cols, 7 + cols), nw = randn(cols, 2 + cols, 0.5f);
    std::vector<float> xw(cols);
    for (uint32_t i = 0; i < cols; ++i) xw[i] = x[i] * nw[i];
    const test::Rounded xr = test::rounding_layout(norm ? xw : x);
    const double factor = norm ? rms_factor(x) : 1.0;
    // x (its rounding, or the floats before the norm) at float 8 of its buffer, behind a
    // poisoned margin the kernel must not read as x.
    std::vector<float> xbuf(8, std::bit_cast<float>(test::kPoison));
    const std::vector<float>& xin = norm ? x : xr.layout;
    xbuf.insert(xbuf.end(), xin.begin(), xin.end());
    Buffer xb = test::to_device(dev, xbuf);
    Buffer nwb = test::to_device(dev, nw);
    const auto [ref, mag] = products(deq, rows, cols, xr.values, factor);
    const uint32_t y_off = 3, total = y_off + rows + 5;
    // The split's scratch, zeroed, and zero again after each dispatch (its counters reset).
    const uint32_t tiles = (rows + tile - 1) / tile;
    const uint64_t split_words = tiles + (uint64_t)tiles * std::max(ksplit, 1u) * tile;
    Buffer split = dev.create_buffer(split_words * 4, MemoryKind::device);
    dev.fill(split, 0, split_words * 4, 0);
    for (bool acc : {false, true}) {
        Buffer y = test::poisoned(dev, total);
        const std::vector<float> init = randn(rows, 9, 3.f);
        if (acc) dev.upload(y, y_off * 4, init.data(), rows * 4);
        test::run(dev, [&](CommandList& cl) {
            K.gemv_tile(cl, t, view(w), rows, cols, view(xb), 8, view(y), y_off, acc, threads, tile,
                        0, norm ? view(nwb) : View{}, grid, ksplit, view(split));
        });
        if (ksplit > 1) {
            const auto counts = test::from_device<uint32_t>(dev, split, tiles);
            for (uint32_t i = 0; i < tiles; ++i)
                ASSERT_EQ(counts[i], 0u) << "tile " << i << "'s count not reset";
        }
        const auto out = test::from_device<float>(dev, y, total);
        const std::string what =
            fmt::format("{} {}x{} by {} in {}{}{}{}{}", qtype_name(t), rows, cols, tile, threads,
                        norm ? " norm" : "", grid ? fmt::format(" grid {}", grid) : "",
                        ksplit > 1 ? fmt::format(" split {}", ksplit) : "", acc ? " acc" : "");
        for (uint32_t i = 0; i < total; ++i) {
            if (i >= y_off && i < y_off + rows) continue;
            ASSERT_EQ(test::bits(out[i]), test::kPoison) << what << ": wrote outside y at " << i;
        }
        for (uint32_t r = 0; r < rows; ++r) {
            const double want = ref[r] + (acc ? init[r] : 0.0);
            ASSERT_TRUE(std::isfinite(out[y_off + r])) << what << " row " << r;
            ASSERT_NEAR(out[y_off + r], want, 1e-5 * mag[r] + 1e-5) << what << " row " << r;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemvTile,
    ::testing::Values(
        TileCase{QType::Q4_K, 32, 256, 64, 32}, TileCase{QType::Q4_K, 45, 512, 64, 32},
        TileCase{QType::Q4_K, 70, 1280, 64, 32}, TileCase{QType::Q4_K, 33, 1024, 256, 32},
        TileCase{QType::Q4_K, 20, 768, 32, 16}, TileCase{QType::Q6_K, 32, 256, 64, 32},
        TileCase{QType::Q6_K, 45, 768, 64, 32}, TileCase{QType::Q6_K, 33, 1280, 256, 32},
        TileCase{QType::Q6_K, 20, 512, 32, 16}, TileCase{QType::Q6_K, 9, 256, 512, 8},
        TileCase{QType::Q4_K, 45, 512, 64, 32, true},
        TileCase{QType::Q4_K, 100, 1280, 64, 16, true, 3},
        TileCase{QType::Q6_K, 70, 768, 64, 32, true, 2},
        TileCase{QType::Q6_K, 65, 512, 128, 16, false, 2}, TileCase{QType::Q4_K, 21, 1536, 48, 8},
        TileCase{QType::Q6_K, 17, 768, 48, 8}, TileCase{QType::Q4_K, 45, 1280, 64, 32, false, 0, 3},
        TileCase{QType::Q6_K, 33, 768, 64, 16, false, 0, 4},
        TileCase{QType::Q4_K, 40, 1024, 64, 32, true, 0, 2}));

// The tiled GEMV beside the launcher's (Kernels::gemv over the same x rounded by the GEMV
// before, the device's own rows), on decode-sized matrices; us a GEMV behind a barrier each,
// weights copied past the last-level cache, every row of the last run checked.
TEST(GemvSpeed, Tile) {
    VK_SPEED_DEVICE();
    const Features& f = dev.features();
    constexpr uint32_t kDistinct = 64;
    struct Shape {
        QType t;
        uint32_t rows, cols;
    };
    for (const Shape& sh : {Shape{QType::Q4_K, 4096, 4096}, Shape{QType::Q4_K, 12288, 4096},
                            Shape{QType::Q4_K, 24576, 4096}, Shape{QType::Q4_K, 65536, 4096},
                            Shape{QType::Q4_K, 4096, 12288}, Shape{QType::Q6_K, 8192, 4096},
                            Shape{QType::Q6_K, 4096, 12288}, Shape{QType::Q6_K, 65536, 4096},
                            Shape{QType::Q6_K, 248320, 4096}}) {
        const auto [t, rows, cols] = sh;
        if (!K.gemv_tile_supported(t)) GTEST_SKIP() << "no integer dot products on this device";
        const std::vector<float> wf = randn((size_t)kDistinct * cols, rows);
        const auto [gq, deq] = test::quantize_rows(t, wf, kDistinct, cols, false);
        const std::vector<uint8_t> dq =
            test::quantize_rows(t, wf, kDistinct, cols).blocks;  // the device's rows
        const uint64_t rb = row_size(t, cols), bytes = rb * rows;
        std::vector<uint8_t> gguf(bytes), own(bytes + 16, 0);
        for (uint32_t r = 0; r < rows; ++r) {
            std::copy_n(gq.data() + (r % kDistinct) * rb, rb, gguf.data() + r * rb);
            std::copy_n(dq.data() + (r % kDistinct) * rb, rb, own.data() + r * rb);
        }
        const std::vector<float> x = randn(cols, 3);
        const test::Rounded xr = test::rounding_layout(x);
        Buffer xb = test::to_device(dev, xr.layout);
        const auto [ref, mag] = products(deq, kDistinct, cols, xr.values, 1.0);
        const uint32_t copies =
            f.cpu ? 1 : (uint32_t)std::clamp<uint64_t>((512ull << 20) / bytes, 1, 64);
        const uint32_t runs = f.cpu ? 2 : 100;
        Buffer y = test::poisoned(dev, rows);
        // x before an RMSNorm too (gemv.comp NORM_IN): the launcher's, and the tiled GEMV with a
        // workgroup a tile or two walking workgroups a multiprocessor.
        const std::vector<float> nw = randn(cols, 4, 0.5f);
        Buffer xf = test::to_device(dev, x), nwb = test::to_device(dev, nw);
        std::vector<float> xw(cols);
        for (uint32_t i = 0; i < cols; ++i) xw[i] = x[i] * nw[i];
        const test::Rounded xn = test::rounding_layout(xw);
        const double factor = rms_factor(x);
        const auto [refn, magn] = products(deq, kDistinct, cols, xn.values, factor);
        struct Config {
            uint32_t threads, tile, ablate;  // threads 0: the launcher's GEMV
            bool norm = false;
            uint32_t grid = 0, ksplit = 1;
        };
        std::vector<Config> configs = {{0, 0, 0}};
        for (uint32_t tile : {16u, 32u})
            for (uint32_t threads : {256u, 512u, 1024u}) configs.push_back({threads, tile, 0});
        configs.push_back({512, 32, 2});
        // Long rows: a slot a run (a Q4_K block, half a Q6_K block), so no thread waits on a
        // second run's loads, in tiles of 8 or 16.
        const uint32_t row_runs = cols / 256 * (t == QType::Q6_K ? 2 : 1);
        if (cols >= 8192)
            for (uint32_t tile : {8u, 16u})
                if (tile * row_runs <= f.max_workgroup_invocations)
                    configs.push_back({tile * row_runs, tile, 0});
        // And tiles of 32 with each row's runs split over 2-4 workgroups (the runs accumulate
        // into y, which is then not checked).
        if (cols >= 8192)
            for (uint32_t ks : {2u, 3u, 4u})
                for (uint32_t threads : {256u, 512u})
                    configs.push_back({threads, 32, 0, false, 0, ks});
        configs.push_back({0, 0, 0, true});
        for (uint32_t threads : {256u, 512u}) {
            configs.push_back({threads, 32, 0, true});
            configs.push_back({threads, 32, 0, true, f.sm_count * 2048 / threads});
        }
        // Every layout's copies are made once, before any is timed. Made again between
        // configurations (the buffers before freed), the same kernel read slower in one call on
        // an H200 than in the call before (the launcher's 65536-row Q4_K GEMV 50.8 -> 80.0 us;
        // the cause, the new buffers' placement, is a guess).
        std::map<uint32_t, std::vector<Buffer>> copies_of;  // by tile rows (0: the device's rows)
        for (const Config& c : configs) {
            const uint32_t as = c.threads ? c.tile : 0;
            if (copies_of.count(as)) continue;
            const std::vector<uint8_t> data =
                as ? Kernels::tile_rows(t, gguf.data(), rows, cols, as) : own;
            for (uint32_t i = 0; i < copies; ++i)
                copies_of[as].push_back(test::to_device(dev, data));
        }
        // The splits' scratch, zero again after every dispatch.
        const uint64_t split_bytes = ((uint64_t)rows + (uint64_t)rows * 4) * 4 + 4096;
        Buffer split = dev.create_buffer(split_bytes, MemoryKind::device);
        dev.fill(split, 0, split_bytes, 0);
        for (const Config& c : configs) {
            const std::vector<Buffer>& w = copies_of[c.threads ? c.tile : 0];
            dev.fill(y, 0, (uint64_t)rows * 4, test::kPoison);
            uint32_t i = 0;  // the run: its copy of the weights
            const double us =
                1e3 * test::device_ms_per_run(dev, runs, [&](CommandList& cl) {
                    const View wi = view(w[i++ % copies]);
                    if (c.threads) {
                        K.gemv_tile(cl, t, wi, rows, cols, view(c.norm ? xf : xb), 0, view(y), 0,
                                    c.ksplit > 1, c.threads, c.tile, c.ablate,
                                    c.norm ? view(nwb) : View{}, c.grid, c.ksplit, view(split));
                        return;
                    }
                    test::Scoped bytes_x(K.gemv_x, Kernels::GemvX::bytes);
                    if (c.norm) {
                        K.gemv_normed(cl, t, wi, rows, cols, view(xf), 0, view(y), 0, false,
                                      Kernels::GemvNormIn{view(nwb), 1e-6f});
                        return;
                    }
                    Kernels::GemvRounding rd;
                    rd.x_rounded = true;
                    K.gemv(cl, t, wi, rows, cols, view(xb), 0, view(y), 0, false, {}, &rd);
                });
            const std::string how =
                (c.threads ? fmt::format("tiles of {} in {}{}", c.tile, c.threads,
                                         c.ablate ? ", no decode" : "")
                           : std::string("launcher")) +
                (c.norm ? ", x before its norm" : "") +
                (c.grid ? fmt::format(", {} workgroups walking", c.grid) : "") +
                (c.ksplit > 1 ? fmt::format(", rows split over {} workgroups", c.ksplit) : "");
            fmt::print("GEMV {} {} x {}, {}: {:.1f} MB, {:.2f} us, {:.1f} GB/s\n", qtype_name(t),
                       rows, cols, how, bytes / 1e6, us, bytes / (us * 1e3));
            if (c.ablate || c.ksplit > 1) continue;  // wrong by design, or summed over the runs
            const auto out = test::from_device<float>(dev, y, rows);
            for (uint32_t r = 0; r < rows; ++r) {
                const uint32_t d = r % kDistinct;
                if (c.norm)
                    ASSERT_NEAR(out[r], refn[d], 2e-4 * magn[d] + 1e-5) << how << " row " << r;
                else
                    ASSERT_NEAR(out[r], ref[d], 1e-5 * mag[d] + 1e-5) << how << " row " << r;
            }
        }
    }
}

}  // namespace
}  // namespace dl::vk
