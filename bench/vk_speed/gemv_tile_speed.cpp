// Speed reports of the tiled GEMV: beside the launcher's GEMV over the same bytes, and the
// token's tiled stages in their own forms, part by part.
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
#include "speed.h"
#include "vulkan/weight_layout.h"

namespace dl::vk {
namespace {

using test::products;
using test::Products;
using test::randn;
using test::rms_factor;

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
            const double us = 1e3 * test::device_ms_per_run(dev, runs, [&](CommandList& cl) {
                                  const View wi = view(w[i++ % copies]);
                                  if (c.threads) {
                                      K.gemv_tile(cl, {.type = t,
                                                       .w = wi,
                                                       .rows = rows,
                                                       .cols = cols,
                                                       .xr = view(c.norm ? xf : xb),
                                                       .x_off = 0,
                                                       .y = view(y),
                                                       .y_off = 0,
                                                       .accumulate = c.ksplit > 1,
                                                       .threads = c.threads,
                                                       .tile = c.tile,
                                                       .omitted_work = c.ablate,
                                                       .norm_w = c.norm ? view(nwb) : View{},
                                                       .grid = c.grid,
                                                       .ksplit = c.ksplit,
                                                       .split = view(split)});
                                      return;
                                  }
                                  test::Scoped bytes_x(K.tuning.gemv_x, Kernels::GemvX::bytes);
                                  if (c.norm) {
                                      K.gemv_normed(cl,
                                                    {.type = t,
                                                     .w = wi,
                                                     .rows = rows,
                                                     .cols = cols,
                                                     .x = view(xf),
                                                     .y = view(y)},
                                                    Kernels::GemvNormIn{view(nwb), 1e-6f});
                                      return;
                                  }
                                  Kernels::GemvRounding rd;
                                  rd.x_rounded = true;
                                  K.gemv(cl, {.type = t,
                                              .w = wi,
                                              .rows = rows,
                                              .cols = cols,
                                              .x = view(xb),
                                              .y = view(y),
                                              .rounding = &rd});
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

// The decode token's tiled GEMV stages in the forms the token records them (Kernels::gemv_swiglu
// and gemv with their GemvRounding, as in ResidentDriver's token command), each beside the same
// bytes as one plain GEMV over x rounded already, and with the form's parts taken away one at a
// time: what each part of a form costs. The FFN pair of a 9B (two 12288 x 4096 Q4_K matrices):
// x rounded times the norm weights with the blocks' sums of squares (XMODE 4) and its rows
// rounded for the down projection (ROUND_OUT); then with eight slots a matrix. The down
// projection (4096 x 12288, Q4_K and Q6_K) and the output projection (4096 x 4096 Q4_K): added
// to y, with the new y rounded times the next norm's weights (ROUND_NORM). The token form's
// rows are checked against the CPU's on the last run.
TEST(GemvSpeed, TokenForms) {
    VK_SPEED_DEVICE();
    const Features& f = dev.features();
    // (A CPU device takes x in bytes only when asked.)
    test::Scoped bytes_x(K.tuning.gemv_x, f.cpu ? Kernels::GemvX::bytes : K.tuning.gemv_x);
    if (!K.gemv_tile_supported(QType::Q4_K) || !K.gemv_tiled_for(QType::Q4_K, 4096))
        GTEST_SKIP() << "no tiled GEMV on this device";
    constexpr uint32_t kDistinct = 64;
    const uint32_t runs = f.cpu ? 2 : 100;
    using R = Kernels::GemvRounding;
    // One matrix of `rows` x cols in tiles (a pair: two, the up rows after the gate rows), its
    // copies over `span` bytes, back to back in slabs of 1 GiB as the token's weights lie in the
    // weight arena (no buffer of its own a copy), and the CPU's dequantized distinct rows of each.
    struct Mat {
        std::vector<Buffer> slabs;
        std::vector<View> copies;
        std::vector<float> deq;  // kDistinct rows a matrix, the matrices one after the other
        uint64_t bytes = 0;      // one matrix
    };
    auto make = [&](QType t, uint32_t rows, uint32_t cols, uint32_t matrices, uint64_t span) {
        Mat m;
        std::vector<uint8_t> all;
        for (uint32_t k = 0; k < matrices; ++k) {
            const std::vector<float> wf = randn((size_t)kDistinct * cols, 11 + k + rows);
            const auto [gq, deq] = test::quantize_rows(t, wf, kDistinct, cols, false);
            const uint64_t rb = row_size(t, cols);
            std::vector<uint8_t> gguf(rb * rows);
            for (uint32_t r = 0; r < rows; ++r)
                std::copy_n(gq.data() + (r % kDistinct) * rb, rb, gguf.data() + r * rb);
            const std::vector<uint8_t> tiled = Kernels::tile_rows(t, gguf.data(), rows, cols, 32);
            m.bytes = tiled.size();
            all.insert(all.end(), tiled.begin(), tiled.end());
            m.deq.insert(m.deq.end(), deq.begin(), deq.end());
        }
        const uint64_t stride = (all.size() + 255) / 256 * 256;
        const uint32_t copies = f.cpu ? 1 : (uint32_t)std::clamp<uint64_t>(span / stride, 1, 1024);
        const uint32_t per_slab = (uint32_t)std::max<uint64_t>((1ull << 30) / stride, 1);
        for (uint32_t i = 0; i < copies; ++i) {
            if (i % per_slab == 0)
                m.slabs.push_back(
                    dev.create_buffer(std::min(copies - i, per_slab) * stride, MemoryKind::device));
            Buffer& b = m.slabs.back();
            dev.upload(b, (i % per_slab) * stride, all.data(), all.size());
            m.copies.push_back(view(b, (i % per_slab) * stride, all.size()));
        }
        return m;
    };
    // x rounded (the layout of a GemvRounding) and, after it, x rounded times the norm weights
    // with each block's sum of squares of x (normed_rounding_floats), for a reader over that
    // norm's input (XMODE 4).
    auto x_layouts = [&](uint32_t cols, std::vector<float>& plain, std::vector<float>& normed,
                         double& factor) {
        const std::vector<float> x = randn(cols, 21 + cols), nw = randn(cols, 22 + cols, 0.5f);
        std::vector<float> xw(cols);
        for (uint32_t i = 0; i < cols; ++i) xw[i] = x[i] * nw[i];
        const test::Rounded xr = test::rounding_layout(x), xn = test::rounding_layout(xw);
        std::vector<float> layout = xn.layout;
        for (uint32_t b = 0; b < cols / 16; ++b) {
            double ss = 0;
            for (uint32_t i = 0; i < 16; ++i) ss += (double)x[16 * b + i] * x[16 * b + i];
            layout.push_back((float)ss);
        }
        factor = rms_factor(x);
        std::vector<float> buf = xr.layout;
        buf.insert(buf.end(), layout.begin(), layout.end());
        plain = xr.values;
        normed = xn.values;
        return buf;  // plain at float 0, normed at rounding_floats(cols)
    };
    struct Row {
        std::string what;
        std::function<void(CommandList&, View)> record;  // over one copy of the weights
        uint32_t slots = 0;                              // gemv_tile_slots
        uint32_t tile = 0;                               // gemv_work_tile
        bool big = false;  // over copies spanning kBig bytes (a 9B's weights), not 512 MiB
    };
    const uint64_t kSmall = 512ull << 20, kBig = 5ull << 30;
    auto time = [&](const Mat& m, const Row& row) {
        test::Scoped slots(K.tuning.gemv_tile_slots, row.slots);
        test::Scoped tile(K.tuning.gemv_work_tile, row.tile);
        uint32_t i = 0;
        return 1e3 * test::device_ms_per_run(dev, runs, [&](CommandList& cl) {
                   row.record(cl, m.copies[i++ % m.copies.size()]);
               });
    };

    // The FFN pair.
    {
        const uint32_t rows = 12288, cols = 4096;
        const Mat m = make(QType::Q4_K, rows, cols, 2, kSmall);
        const Mat big = f.cpu ? Mat{} : make(QType::Q4_K, rows, cols, 2, kBig);
        std::vector<float> xv, xnv;
        double factor = 0;
        Buffer xb = test::to_device(dev, x_layouts(cols, xv, xnv, factor));
        const uint32_t xn_off = Kernels::rounding_floats(cols);
        // The norm's weights the launcher takes; the kernel reads none of them under XMODE 4 (x
        // is rounded times them already).
        const std::vector<float> nw = randn(cols, 23, 0.5f);
        Buffer nwb = test::to_device(dev, nw);
        const uint32_t out_off = rows;
        Buffer y = test::poisoned(dev, 2 * rows + Kernels::rounding_floats(rows));
        const Kernels::GemvNormIn nin{view(nwb), 1e-6f};
        auto pair = [&](bool normed, bool round) {
            return [&, normed, round](CommandList& cl, View w) {
                R r;
                r.x_rounded = true;
                if (round) r.out_off = out_off;
                K.gemv_swiglu(cl,
                              {.type = QType::Q4_K,
                               .w = w,
                               .rows = rows,
                               .cols = cols,
                               .x = view(xb),
                               .x_off = normed ? xn_off : 0,
                               .y = view(y),
                               .rounding = &r},
                              0, m.bytes, normed ? &nin : nullptr);
            };
        };
        auto one_gemv = [&](CommandList& cl, View w) {
            R r;
            r.x_rounded = true;
            K.gemv(cl, {.type = QType::Q4_K,
                        .w = w,
                        .rows = 2 * rows,
                        .cols = cols,
                        .x = view(xb),
                        .y = view(y),
                        .rounding = &r});
        };
        const std::vector<Row> forms = {
            {"one GEMV over both matrices' rows, x rounded", one_gemv},
            {"pair, x rounded", pair(false, false)},
            {"pair, x rounded, rows rounded", pair(false, true)},
            {"pair, x normed", pair(true, false)},
            {"pair, x normed, rows rounded (the token's)", pair(true, true)},
            {"pair, x normed, rows rounded, 8 slots a matrix", pair(true, true), 8},
            {"pair, x normed, rows rounded, 2 slots a matrix", pair(true, true), 2},
            {"pair, x normed, rows rounded, half tiles, 8 slots a matrix", pair(true, true), 8, 16},
            {"pair, x normed, rows rounded, half tiles, 4 slots a matrix", pair(true, true), 4, 16},
            {"pair, x normed, rows rounded, 2 slots a matrix, copies over 5 GiB", pair(true, true),
             2, 0, true},
            {"one GEMV over both matrices' rows, x rounded, copies over 5 GiB", one_gemv, 0, 0,
             true},
            {"pair, x normed, rows rounded (the token's), copies over 5 GiB", pair(true, true), 0,
             0, true},
        };
        for (const Row& row : forms) {
            if (row.big && f.cpu) continue;
            const double us = time(row.big ? big : m, row);
            fmt::print(
                "token form: FFN pair Q4_K 2 x {} x {}, {}: {:.1f} MB, {:.2f} us, {:.1f} GB/s\n",
                rows, cols, row.what, 2 * m.bytes / 1e6, us, 2 * m.bytes / (us * 1e3));
        }
        // The token's form and the half tiles, last run: silu(g) · u over x normed, every row.
        for (size_t fi : {size_t{4}, size_t{7}}) {
            dev.fill(y, 0, (uint64_t)rows * 4, test::kPoison);
            {
                test::Scoped slots(K.tuning.gemv_tile_slots, forms[fi].slots);
                test::Scoped tile(K.tuning.gemv_work_tile, forms[fi].tile);
                test::run(dev, [&](CommandList& cl) { forms[fi].record(cl, m.copies[0]); });
            }
            const auto out = test::from_device<float>(dev, y, rows);
            const auto [g, gm] = products(
                std::vector<float>(m.deq.begin(), m.deq.begin() + (size_t)kDistinct * cols),
                kDistinct, cols, xnv, factor);
            const auto [u, um] =
                products(std::vector<float>(m.deq.begin() + (size_t)kDistinct * cols, m.deq.end()),
                         kDistinct, cols, xnv, factor);
            for (uint32_t r = 0; r < rows; ++r) {
                const uint32_t d = r % kDistinct;
                const double want = g[d] / (1 + std::exp(-g[d])) * u[d];
                const double tol =
                    2e-4 * (gm[d] * std::fabs(u[d]) + um[d] * std::fabs(g[d])) + 1e-5;
                ASSERT_TRUE(std::isfinite(out[r])) << "row " << r;
                ASSERT_NEAR(out[r], want, tol) << "FFN pair row " << r << ", " << forms[fi].what;
            }
        }
    }

    // GEMVs that add to y: the down projections and an output projection.
    struct Shape {
        QType t;
        uint32_t rows, cols;
        const char* name;
    };
    for (const Shape& sh : {Shape{QType::Q4_K, 4096, 12288, "down projection"},
                            Shape{QType::Q6_K, 4096, 12288, "down projection"},
                            Shape{QType::Q4_K, 4096, 4096, "output projection"}}) {
        const auto [t, rows, cols, name] = sh;
        if (!K.gemv_tiled_for(t, cols)) continue;
        const Mat m = make(t, rows, cols, 1, kSmall);
        const Mat big = f.cpu ? Mat{} : make(t, rows, cols, 1, kBig);
        std::vector<float> xv, xnv;
        double factor = 0;
        Buffer xb = test::to_device(dev, x_layouts(cols, xv, xnv, factor));
        const std::vector<float> nw = randn(rows, 24, 0.5f), init = randn(rows, 25, 2.f);
        Buffer nwb = test::to_device(dev, nw);
        const uint32_t out_off = rows;
        Buffer y = test::poisoned(dev, rows + Kernels::normed_rounding_floats(rows));
        dev.upload(y, 0, init.data(), rows * 4);
        Buffer split = dev.create_buffer(Kernels::split_bytes(rows), MemoryKind::device);
        dev.fill(split, 0, Kernels::split_bytes(rows), 0);
        test::Scoped scratch(K.gemv_split, view(split));
        auto add = [&](bool acc, bool round, bool wide = true) {
            return [&, acc, round, wide](CommandList& cl, View w) {
                test::Scoped wt(K.tuning.gemv_wide_tiles, wide);
                R r;
                r.x_rounded = true;
                if (round) {
                    r.out_off = out_off;
                    r.out_norm = view(nwb);
                }
                K.gemv(cl, {.type = t,
                            .w = w,
                            .rows = rows,
                            .cols = cols,
                            .x = view(xb),
                            .y = view(y),
                            .accumulate = acc,
                            .rounding = &r});
            };
        };
        const std::vector<Row> forms = {
            {"x rounded, y written", add(false, false)},
            {"x rounded, added to y", add(true, false)},
            {"x rounded, added to y, y rounded times a norm's weights (the token's)",
             add(true, true)},
            {"the token's, in parts of eight slots", add(true, true, false)},
            {"x rounded, y written, copies over 5 GiB", add(false, false), 0, 0, true},
            {"the token's, copies over 5 GiB", add(true, true), 0, 0, true},
        };
        for (const Row& row : forms) {
            if (row.big && f.cpu) continue;
            const double us = time(row.big ? big : m, row);
            fmt::print("token form: {} {} {} x {}, {}: {:.1f} MB, {:.2f} us, {:.1f} GB/s\n", name,
                       qtype_name(t), rows, cols, row.what, m.bytes / 1e6, us,
                       m.bytes / (us * 1e3));
        }
        // The token's form once over y = init: every row against init + W · x.
        dev.upload(y, 0, init.data(), rows * 4);
        test::run(dev, [&](CommandList& cl) { forms[2].record(cl, m.copies[0]); });
        const auto out = test::from_device<float>(dev, y, rows);
        const auto [ref, mag] = products(m.deq, kDistinct, cols, xv, 1.0);
        for (uint32_t r = 0; r < rows; ++r) {
            const uint32_t d = r % kDistinct;
            ASSERT_TRUE(std::isfinite(out[r])) << name << " row " << r;
            ASSERT_NEAR(out[r], init[r] + ref[d], 1e-5 * mag[d] + 1e-4) << name << " row " << r;
        }
    }
}

}  // namespace
}  // namespace dl::vk
