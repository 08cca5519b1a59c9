// The tiled Q4_K GEMV of the speed report (Kernels::gemv_tile, shaders/gemv_tile.comp): against
// the CPU's products over the same rounded x, outputs poisoned, every row checked, NaN failing;
// its time beside the launcher's GEMV is a speed report (bench/vk_speed).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "gemv_products.h"
#include "quant/quant.h"
#include "vk_test.h"
#include "vulkan/weight_layout.h"

namespace dl::vk {
namespace {

using test::products;
using test::Products;
using test::randn;
using test::rms_factor;

struct TileCase {
    QType type;
    uint32_t rows, cols, threads, tile;
    bool norm = false;    // x before an RMSNorm, normalized and rounded by the kernel
    uint32_t grid = 0;    // workgroups walking the tiles (0: a workgroup a tile)
    uint32_t ksplit = 1;  // workgroups a tile, the last to finish adding the parts in order
};

// The FFN pair's rows against silu(G·x) · (U·x) from the products (g and u, with their terms'
// magnitudes gm and um for the tolerance), NaN failing.
void check_pair_rows(const std::vector<float>& out, const std::vector<double>& g,
                     const std::vector<double>& gm, const std::vector<double>& u,
                     const std::vector<double>& um, uint32_t rows, const std::string& what) {
    for (uint32_t r = 0; r < rows; ++r) {
        const double want = g[r] / (1 + std::exp(-g[r])) * u[r];
        const double tol = 1e-5 * (gm[r] * std::fabs(u[r]) + um[r] * std::fabs(g[r])) + 1e-5;
        ASSERT_TRUE(std::isfinite(out[r])) << what << " pair row " << r;
        ASSERT_NEAR(out[r], want, tol) << what << " pair row " << r;
    }
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
            K.gemv_tile(cl, {.type = t,
                             .w = view(w),
                             .rows = rows,
                             .cols = cols,
                             .xr = view(xb),
                             .x_off = 8,
                             .y = view(y),
                             .y_off = y_off,
                             .accumulate = acc,
                             .threads = threads,
                             .tile = tile,
                             .omitted_work = 0,
                             .norm_w = norm ? view(nwb) : View{},
                             .grid = grid,
                             .ksplit = ksplit,
                             .split = view(split)});
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

// Workgroups that take part of a tile of the weights' layout (Kernels::gemv_work_tile;
// gemv_tile.comp LAYOUT_TILE): 16 rows of each 32-row tile, over rows that end inside a layout
// tile, alone and as the FFN pair with its rows rounded, against the CPU's products over the same
// rounded x and the same GEMV in whole tiles; outputs poisoned.
TEST(GemvTileParts, HalfTilesMatchTheProducts) {
    VK_TEST_DEVICE();
    test::Scoped bytes_x(K.tuning.gemv_x, Kernels::GemvX::bytes);
    for (QType t : {QType::Q4_K, QType::Q6_K}) {
        const uint32_t rows = 80, cols = 768;  // two layout tiles and half of a third
        if (!K.gemv_tiled_for(t, cols)) GTEST_SKIP() << "no tiled GEMV on this device";
        std::vector<uint8_t> w;
        std::vector<float> deq;
        for (uint32_t k = 0; k < 2; ++k) {  // gate, then up
            auto [q, d] =
                test::quantize_rows(t, randn((size_t)rows * cols, 31 + k), rows, cols, false);
            const auto tiled = Kernels::tile_rows(t, q.data(), rows, cols, kTileRows);
            w.insert(w.end(), tiled.begin(), tiled.end());
            deq.insert(deq.end(), d.begin(), d.end());
        }
        const uint64_t mbytes = w.size() / 2;
        Buffer wb = test::to_device(dev, w);
        const test::Rounded xr = test::rounding_layout(randn(cols, 33));
        Buffer xb = test::to_device(dev, xr.layout);
        const auto [g, gm] = products(std::vector<float>(deq.begin(), deq.begin() + rows * cols),
                                      rows, cols, xr.values, 1.0);
        const auto [u, um] = products(std::vector<float>(deq.begin() + rows * cols, deq.end()),
                                      rows, cols, xr.values, 1.0);
        Kernels::GemvRounding rd;
        rd.x_rounded = true;
        for (uint32_t tile : {16u, 0u})
            for (uint32_t slots : {1u, 2u, 4u}) {
                test::Scoped ts(K.tuning.gemv_tile_slots, slots), tw(K.tuning.gemv_work_tile, tile);
                const std::string what = fmt::format("{} in tiles of {}, {} slots a matrix",
                                                     qtype_name(t), tile ? tile : 32, slots);
                Buffer y = test::poisoned(dev, rows);
                test::run(dev, [&](CommandList& cl) {
                    K.gemv(cl, {.type = t,
                                .w = view(wb),
                                .rows = rows,
                                .cols = cols,
                                .x = view(xb),
                                .x_off = 0,
                                .y = view(y),
                                .y_off = 0,
                                .accumulate = false,
                                .share = {},
                                .rounding = &rd});
                });
                auto out = test::from_device<float>(dev, y, rows);
                for (uint32_t r = 0; r < rows; ++r) {
                    ASSERT_TRUE(std::isfinite(out[r])) << what << " row " << r;
                    ASSERT_NEAR(out[r], g[r], 1e-5 * gm[r] + 1e-5) << what << " row " << r;
                }
                // The pair, its rows also rounded after them.
                Kernels::GemvRounding rp = rd;
                rp.out_off = rows;
                Buffer yp = test::poisoned(dev, rows + Kernels::rounding_floats(rows));
                test::run(dev, [&](CommandList& cl) {
                    K.gemv_swiglu(cl,
                                  {.type = t,
                                   .w = view(wb),
                                   .rows = rows,
                                   .cols = cols,
                                   .x = view(xb),
                                   .x_off = 0,
                                   .y = view(yp),
                                   .y_off = 0,
                                   .rounding = &rp},
                                  0, mbytes, nullptr);
                });
                out = test::from_device<float>(dev, yp, rows + Kernels::rounding_floats(rows));
                check_pair_rows(out, g, gm, u, um, rows, what);
                if (HasFatalFailure()) return;
                for (uint32_t e = 0; e < rows / 16; ++e) {
                    test::RoundedBlock b{};
                    test::read_rounded_block(out, rows, rows, e, what, b);
                    if (HasFatalFailure()) return;
                    for (uint32_t j = 0; j < 16; ++j)
                        ASSERT_NEAR(b.d * b.q[j], out[16 * e + j], 0.51f * b.d + 1e-6f)
                            << what << " pair row " << 16 * e + j << " rounded";
                }
            }
    }
}

// A GEMV over a norm's input rounded already times the norm weights, with each block's sum of
// squares of x after the rounding (GemvRounding::x_rounded over gemv_normed and the FFN pair;
// gemv_tile.comp XMODE 4), the norm's factor taken from the sums: against the CPU's products.
// Rows of up to 8448 values, whose blocks' sums outnumber a workgroup's invocations (several
// loads a thread) at every slot count, down to one slot (32 invocations, 17 loads); outputs
// poisoned, NaN failing.
TEST(GemvTileNormed, ReaderOfANormedRoundingMatchesTheProducts) {
    VK_TEST_DEVICE();
    test::Scoped bytes_x(K.tuning.gemv_x, Kernels::GemvX::bytes);
    test::Scoped tiled(K.tuning.gemv_tiled, Kernels::GemvTiled::on);
    const uint32_t rows = 70;  // two tiles and part of a third
    for (QType t : {QType::Q4_K, QType::Q6_K})
        for (uint32_t cols : {1280u, 8448u}) {
            if (!K.gemv_tiled_for(t, cols)) GTEST_SKIP() << "no tiled GEMV on this device";
            std::vector<uint8_t> w;
            std::vector<float> deq;
            for (uint32_t k = 0; k < 2; ++k) {  // gate, then up
                auto [q, d] = test::quantize_rows(t, randn((size_t)rows * cols, 61 + k + cols),
                                                  rows, cols, false);
                const auto tiled_rows = Kernels::tile_rows(t, q.data(), rows, cols, kTileRows);
                w.insert(w.end(), tiled_rows.begin(), tiled_rows.end());
                deq.insert(deq.end(), d.begin(), d.end());
            }
            const uint64_t mbytes = w.size() / 2;
            Buffer wb = test::to_device(dev, w);
            // x and the norm weights away from unit scale, so a factor summed over part of the
            // blocks shows.
            const std::vector<float> x = randn(cols, 63 + cols, 2.f), nw = randn(cols, 64, 0.5f);
            std::vector<float> xw(cols);
            for (uint32_t i = 0; i < cols; ++i) xw[i] = x[i] * nw[i];
            const test::Rounded xn = test::rounding_layout(xw);
            std::vector<float> xbuf(8, std::bit_cast<float>(test::kPoison));  // x at float 8
            xbuf.insert(xbuf.end(), xn.layout.begin(), xn.layout.end());
            for (uint32_t b = 0; b < cols / 16; ++b) {
                double ss = 0;
                for (uint32_t i = 0; i < 16; ++i) ss += (double)x[16 * b + i] * x[16 * b + i];
                xbuf.push_back((float)ss);
            }
            Buffer xb = test::to_device(dev, xbuf);
            Buffer nwb = test::to_device(dev, nw);
            const Kernels::GemvNormIn nin{view(nwb), 1e-6f};
            const double factor = rms_factor(x);
            const auto [g, gm] =
                products(std::vector<float>(deq.begin(), deq.begin() + (size_t)rows * cols), rows,
                         cols, xn.values, factor);
            const auto [u, um] =
                products(std::vector<float>(deq.begin() + (size_t)rows * cols, deq.end()), rows,
                         cols, xn.values, factor);
            Kernels::GemvRounding rd;
            rd.x_rounded = true;
            for (uint32_t slots : {0u, 1u, 2u}) {  // 0: the launcher's
                test::Scoped ts(K.tuning.gemv_tile_slots, slots);
                const std::string what =
                    fmt::format("{} {} x {}, {} slots", qtype_name(t), rows, cols, slots);
                Buffer y = test::poisoned(dev, rows + 4);
                test::run(dev, [&](CommandList& cl) {
                    K.gemv_normed(cl,
                                  {.type = t,
                                   .w = view(wb),
                                   .rows = rows,
                                   .cols = cols,
                                   .x = view(xb),
                                   .x_off = 8,
                                   .y = view(y),
                                   .y_off = 2,
                                   .accumulate = false,
                                   .share = {},
                                   .rounding = &rd},
                                  nin);
                });
                auto out = test::from_device<float>(dev, y, rows + 4);
                for (uint32_t i : {0u, 1u, rows + 2, rows + 3})
                    ASSERT_EQ(test::bits(out[i]), test::kPoison) << what << ": wrote at " << i;
                for (uint32_t r = 0; r < rows; ++r) {
                    ASSERT_TRUE(std::isfinite(out[2 + r])) << what << " row " << r;
                    ASSERT_NEAR(out[2 + r], g[r], 1e-5 * gm[r] + 1e-5) << what << " row " << r;
                }
                Buffer yp = test::poisoned(dev, rows);
                test::run(dev, [&](CommandList& cl) {
                    K.gemv_swiglu(cl,
                                  {.type = t,
                                   .w = view(wb),
                                   .rows = rows,
                                   .cols = cols,
                                   .x = view(xb),
                                   .x_off = 8,
                                   .y = view(yp),
                                   .y_off = 0,
                                   .rounding = &rd},
                                  0, mbytes, &nin);
                });
                check_pair_rows(test::from_device<float>(dev, yp, rows), g, gm, u, um, rows, what);
                if (HasFatalFailure()) return;
            }
        }
}

}  // namespace
}  // namespace dl::vk
