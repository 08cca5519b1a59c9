// The GEMM kernels of prefill windows and batched steps, each against a reference computed here:
// the GEMM tiles against a double reference over dequantized blocks (every format, both tile
// variants the device offers, odd shapes, poisoned outputs), the batched GEMV's modules without
// subgroup arithmetic, the skinny GEMM's launch rules, the F16 copy of activations and the F16
// expansion of weight rows.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/half.h"
#include "quant/quant.h"
#include "vk_test.h"

namespace dl::vk {
namespace {

using test::randn;

struct GemmCase {
    QType type;
    uint32_t rows, cols;
};

class GemmTiles : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmTiles, MatchDequantizedReference) {
    VK_TEST_DEVICE();
    const auto [t, rows, cols] = GetParam();
    if (auto d = Kernels::gemm_supported(dev.features(), t)) GTEST_SKIP() << d->reason;
    std::vector<float> wf = randn((size_t)rows * cols, 11 + rows + cols);
    const auto [wq, deq] = test::quantize_rows(t, wf, rows, cols);
    Buffer w = test::to_device(dev, wq);

    // Each tile family the device runs: the F32 tiles, the KHR tiles (any y_off), and the NV
    // cooperative matrix 2 tiles (y_off a multiple of 4), in the size gemm() picks and in forced
    // sizes with a tile larger than the matrix and a step past K (the tiles inside the matrices
    // of whole unrolled steps run an unclamped loop); the NV tiles both decoding the
    // blocks inside the tensor loads and over the matrix expanded to F16 in a scratch (poisoned
    // past the matrix). And the batched GEMV that takes windows of up to gemv_rows rows (every
    // window up to 64 rows here; the tiles run with it off), in both its forms and with rows a
    // workgroup forced, and over X rounded to bytes (round_rows(); block formats, devices with
    // integer dot products), checked against the products over the host's rounding of X.
    struct Run {
        Variant v;
        uint32_t y_off;
        Kernels::GemmTile tile;
        int expand;
        uint32_t gemv_rows = 0;
        bool decode_once = false;  // the batched GEMV's forms (Tuning::gemv_batch_decode_once)
        uint32_t gemv_batch_rows = 0;
        bool bytes = false;    // the batched GEMV over X rounded to bytes
        uint32_t threads = 0;  // its threads a workgroup (0: by the row)
        int split = -1;        // Tuning::gemm_split: the tiles split over K (up to 128 rows)
        bool skinny = false;   // the skinny GEMM (every window here, up to 256 rows)
        uint32_t skinny_parts = 0, skinny_rt = 0;
        bool skinny_prefetch = false;  // Tuning::gemm_skinny_prefetch
        uint32_t skinny_ahead = 1;     // Tuning::gemm_skinny_ahead
        uint32_t skinny_mt = 0;        // Tuning::gemm_skinny_mt
        bool skinny_half = false;      // Tuning::gemm_skinny_half
    };
    std::vector<Run> runs = {{Variant::scalar, 5, {}, 0},
                             {Variant::scalar, 5, {}, 0, 64},
                             {Variant::scalar, 5, {}, 0, 64, true},
                             {Variant::scalar, 5, {}, 0, 64, true, 1},
                             {Variant::scalar, 5, {}, 0, 64, false, 2},
                             {Variant::scalar, 5, {}, 0, 64, false, 0, true},
                             {Variant::scalar, 5, {}, 0, 64, false, 2, true},
                             // Fewer threads than sums: each stores several.
                             {Variant::scalar, 5, {}, 0, 64, false, 8, true, 32},
                             {Variant::scalar, 5, {}, 0, 64, true, 8, false, 256},
                             // The tiles split over K: by the grid, and into 2 and 3 parts.
                             {Variant::scalar, 5, {}, 0, 0, false, 0, false, 0, 1},
                             {Variant::scalar, 5, {}, 0, 0, false, 0, false, 0, 2},
                             {Variant::scalar, 5, {}, 0, 0, false, 0, false, 0, 3}};
    const Features& f = dev.features();
    if (Kernels::gemm_uses_coopmat(f, Variant::khr_coopmat))
        runs.push_back({Variant::khr_coopmat, 5, {}, 0});
    if (Kernels::gemm_uses_cm2(f, dev.variant()))
        for (int expand : {0, 1})
            for (Kernels::GemmTile g :
                 {Kernels::GemmTile{}, Kernels::GemmTile{128, 128, 32},
                  Kernels::GemmTile{128, 128, 32, 128}, Kernels::GemmTile{64, 32, 64}})
                for (int split : {0, 1, 3})
                    runs.push_back({dev.variant(), 8, g, expand, 0, false, 0, false, 0, split});
    // The skinny GEMM over the K-quants: its parts of K by the grid and forced to 2 and 3, its
    // workgroups of two and four tiles of weight rows, with X read between the barriers or
    // requested a stage ahead, the weights one or two stages ahead; and its tiles of 16 rows of
    // X capped at two (more workgroups over the same weight tiles).
    if (Kernels::gemm_uses_skinny(f, dev.variant()) && (t == QType::Q4_K || t == QType::Q6_K)) {
        for (uint32_t ahead : {1u, 2u})
            for (uint32_t rt : {2u, 4u})
                for (uint32_t parts : {0u, 2u, 3u})
                    for (bool prefetch : {false, true})
                        runs.push_back({.v = dev.variant(),
                                        .y_off = 5,
                                        .tile = {},
                                        .expand = 0,
                                        .skinny = true,
                                        .skinny_parts = parts,
                                        .skinny_rt = rt,
                                        .skinny_prefetch = prefetch,
                                        .skinny_ahead = ahead});
        runs.push_back({.v = dev.variant(),
                        .y_off = 5,
                        .tile = {},
                        .expand = 0,
                        .skinny = true,
                        .skinny_rt = 4,
                        .skinny_prefetch = true,
                        .skinny_ahead = 2,
                        .skinny_mt = 2});
        for (uint32_t rt : {2u, 4u})  // Q4_K decoded to halves by bit operations
            runs.push_back({.v = dev.variant(),
                            .y_off = 5,
                            .tile = {},
                            .expand = 0,
                            .skinny = true,
                            .skinny_parts = 2,
                            .skinny_rt = rt,
                            .skinny_prefetch = true,
                            .skinny_ahead = 2,
                            .skinny_half = true});
    }
    Buffer w16 = test::poisoned(dev, (size_t)rows * cols / 2 + 4);
    // 13 and 63 rows: batched GEMVs of uneven groups (two of 7, eight of 8 with one clamped).
    for (uint32_t m : {1u, 7u, 13u, 63u, 64u, 65u, 130u}) {
        const uint32_t x_off = 3;
        std::vector<float> x = randn((size_t)m * cols + x_off, 5 + m);
        Buffer xb = test::to_device(dev, x);
        // X as the batched GEMV over bytes sees it: each row's blocks of 16 rounded to signed
        // bytes, 127 for the largest magnitude.
        std::vector<float> xr(x);
        const test::BytesX rounded = test::round_x_bytes(x.data() + x_off, x.size() - x_off);
        std::copy(rounded.values.begin(), rounded.values.end(), xr.begin() + x_off);
        auto products = [&](const std::vector<float>& xs, std::vector<double>& ref,
                            std::vector<double>& mag) {
            ref.assign((size_t)m * rows, 0.0);
            mag.assign((size_t)m * rows, 0.0);
            for (uint32_t i = 0; i < m; ++i)
                for (uint32_t r = 0; r < rows; ++r)
                    for (uint32_t c = 0; c < cols; ++c) {
                        double p =
                            (double)deq[(size_t)r * cols + c] * xs[x_off + (size_t)i * cols + c];
                        ref[(size_t)i * rows + r] += p;
                        mag[(size_t)i * rows + r] += std::fabs(p);
                    }
        };
        std::vector<double> ref_x, mag_x, ref_xr, mag_xr;
        products(x, ref_x, mag_x);
        products(xr, ref_xr, mag_xr);
        for (const auto& [v, y_off, tile, expand, gemv_rows, once, batch_rows, bytes, threads,
                          split, skinny, skinny_parts, skinny_rt, skinny_prefetch, skinny_ahead,
                          skinny_mt, skinny_half] : runs) {
            // (Each shape is a pipeline to compile: the threads' runs take two window sizes.)
            if (threads && m != 13 && m != 63) continue;
            test::Scoped threads_scope(K.tuning.gemv_batch_threads, threads);
            test::Scoped x_scope(K.tuning.gemv_x,
                                 bytes ? Kernels::GemvX::bytes : Kernels::GemvX::global);
            const bool rounds = K.gemv_batch_reads_bytes(t, cols, m);
            if (bytes && !rounds) continue;  // F32 / F16, or no integer dot products
            const std::vector<double>& ref = rounds ? ref_xr : ref_x;
            const std::vector<double>& mag = rounds ? mag_xr : mag_x;
            test::Scoped once_scope(K.tuning.gemv_batch_decode_once, once);
            test::Scoped rows_scope(K.tuning.gemv_batch_rows, batch_rows);
            test::Scoped tile_scope(K.tuning.gemm_tile, tile);
            test::Scoped expand_scope(K.tuning.gemm_expand, expand);
            test::Scoped gemv_scope(K.tuning.gemm_gemv_rows, gemv_rows);
            // (F32 and F16 matrices then follow gemm_gemv_rows too, so their tiles are tested.)
            test::Scoped gemv_float_scope(K.tuning.gemm_gemv_rows_float, 0u);
            test::Scoped split_scope(K.tuning.gemm_split, split);
            test::Scoped skinny_scope(K.tuning.gemm_skinny, skinny);
            test::Scoped skinny_rows_scope(K.tuning.gemm_skinny_rows, 256u);
            test::Scoped skinny_parts_scope(K.tuning.gemm_skinny_parts, skinny_parts);
            test::Scoped skinny_rt_scope(K.tuning.gemm_skinny_rt, skinny_rt);
            test::Scoped skinny_prefetch_scope(K.tuning.gemm_skinny_prefetch, skinny_prefetch);
            test::Scoped skinny_ahead_scope(K.tuning.gemm_skinny_ahead, skinny_ahead);
            test::Scoped skinny_half_scope(K.tuning.gemm_skinny_half, skinny_half);
            test::Scoped skinny_mt_scope(K.tuning.gemm_skinny_mt, skinny_mt);
            if (skinny) {
                ASSERT_TRUE(K.gemm_skinny(v, t, cols, m)) << "a skinny run that is not skinny";
            }
            // The split's scratch, zero (its tiles' counters); the split runs twice, the first
            // time into a scratch y, so that a counter not set back to zero fails the second.
            // Its sums' scratch is poisoned: each part writes its sums before any are read.
            const Kernels::SplitNeed need = K.gemm_split_need(v, t, rows, cols, m);
            const uint64_t split_bytes = need.parts;
            if (split >= 2 && v == Variant::scalar && m <= Kernels::kGemmSplitRows &&
                m > gemv_rows && cols >= 128) {
                ASSERT_GT(split_bytes, 0u) << "a forced split that does not split";
            }
            if (skinny && skinny_parts >= 2 && cols >= 512) {
                ASSERT_GT(split_bytes, 0u) << "a forced skinny split that does not split";
            }
            Buffer counters = test::to_device(
                dev, std::vector<uint32_t>(std::max<uint64_t>(need.counters, 16) / 4, 0u));
            Buffer sums = test::poisoned(dev, std::max<uint64_t>(need.parts, 16) / 4);
            const Kernels::SplitScratch scratch{view(counters), view(sums)};
            // F16 tiles round x and w to 11 bits; the F32 tiles and the GEMV only reorder the sum
            // (over bytes, a product a hair from a half may round the other way).
            const double tol = rounds ? 1e-4 : v == Variant::scalar || m <= gemv_rows ? 1e-5 : 2e-3;
            for (bool acc : {false, true}) {
                const size_t n_out = (size_t)m * rows;
                Buffer y = test::poisoned(dev, n_out + y_off + 4);
                Buffer y_first = test::poisoned(dev, n_out + y_off + 4);
                std::vector<float> init(n_out, 0.f);
                if (acc) {
                    init = randn(n_out, 9);
                    dev.upload(y, y_off * 4, init.data(), n_out * 4);
                }
                // The F16 copy of X the cooperative-matrix tiles read (or its rows rounded to
                // bytes), poisoned past the rows; as a window's, it holds more rows than m (past
                // the last tile's), which the NV tiles read unclamped: NaN there must reach no
                // product of the rows below m.
                const uint32_t x16_rows = (m + 127) / 128 * 128 + 64;
                const uint32_t n16 = (x16_rows * cols + 7) / 8 * 8;
                Buffer x16 =
                    test::poisoned(dev, std::max(n16 / 2, m * Kernels::rounding_floats(cols)) + 4);
                const bool f16 = !rounds && K.gemm_reads_f16(v, cols);
                test::run(dev, [&](CommandList& cl) {
                    if (f16) {
                        K.f16_copy(cl, view(xb), x_off, view(x16), m * cols);
                        cl.barrier();
                    }
                    if (rounds) {
                        K.round_rows(cl, view(xb), x_off, view(x16), 0, cols, m);
                        cl.barrier();
                    }
                    if (split_bytes > 0) {
                        K.gemm(cl, v, t, view(w), rows, cols, view(xb), x_off, view(x16),
                               view(y_first), y_off, m, false, view(w16), false, 0, scratch);
                        cl.barrier();
                    }
                    K.gemm(cl, v, t, view(w), rows, cols, view(xb), x_off, view(x16), view(y),
                           y_off, m, acc, view(w16), false, 0, scratch);
                });
                auto out = test::from_device<float>(dev, y, n_out + y_off + 4);
                for (uint32_t i = 0; i < y_off; ++i)
                    ASSERT_EQ(test::bits(out[i]), test::kPoison) << "wrote before y_off";
                for (uint32_t i = 0; i < 4; ++i)
                    ASSERT_EQ(test::bits(out[y_off + n_out + i]), test::kPoison) << "wrote past";
                for (size_t i = 0; i < n_out; ++i) {
                    ASSERT_TRUE(std::isfinite(out[y_off + i]))
                        << qtype_name(t) << " m " << m << " element " << i;
                    ASSERT_NEAR(out[y_off + i], ref[i] + init[i], tol * mag[i] + 1e-5)
                        << qtype_name(t) << " " << variant_name(v) << " tile " << tile.bm << "x"
                        << tile.bn << "x" << tile.bk << " expand " << expand << " gemv rows "
                        << gemv_rows << " decode once " << once << " rows a workgroup "
                        << batch_rows << " bytes " << rounds << " threads " << threads << " split "
                        << split << " (" << split_bytes << " bytes) skinny " << skinny << " parts "
                        << skinny_parts << " rt " << skinny_rt << " prefetch " << skinny_prefetch
                        << " ahead " << skinny_ahead << " mt " << skinny_mt << " m " << m << " row "
                        << i / rows << " col " << i % rows << " acc " << acc;
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, GemmTiles,
    ::testing::Values(GemmCase{QType::F32, 70, 72}, GemmCase{QType::F32, 33, 37},
                      GemmCase{QType::F32, 33, 96}, GemmCase{QType::F16, 65, 40},
                      GemmCase{QType::Q4_0, 70, 96}, GemmCase{QType::Q8_0, 33, 96},
                      GemmCase{QType::Q4_K, 70, 256}, GemmCase{QType::Q5_K, 33, 512},
                      GemmCase{QType::Q6_K, 64, 256},
                      // Q6_K rows of several blocks in two tiles of rows, the second one
                      // row (weight_layout.h).
                      GemmCase{QType::Q6_K, 33, 768},
                      // Rows of whole unrolled steps (K of 512), so the NV tiles that lie
                      // inside the matrices take their unclamped loop beside clamped edge tiles.
                      GemmCase{QType::F16, 130, 512}, GemmCase{QType::Q8_0, 70, 512},
                      GemmCase{QType::Q6_K, 130, 512},
                      // Enough weight rows that the batched GEMV's workgroups take two groups of
                      // vectors each (KernelFamily::batch_gemv_span on a device of unknown size).
                      GemmCase{QType::Q4_K, 600, 256}),
    [](const auto& info) {
        return fmt::format("{}_{}x{}", qtype_name(info.param.type), info.param.rows,
                           info.param.cols);
    });

// The batched GEMV's modules without subgroup arithmetic (their shared-memory reduction), as a
// device without it runs them, dispatched directly: over F32 x and over rounded bytes, in
// workgroups of fewer threads than sums (each storing several) and of more.
TEST(BatchedGemvModule, SharedMemoryReductionMatchesReference) {
    VK_TEST_DEVICE();
    const QType t = QType::Q4_K;
    const uint32_t rows = 37, cols = 4096, m = 8,
                   k_rows = 8;  // 128 slices a row: every thread busy
    const auto [wq, deq] = test::quantize_rows(t, randn((size_t)rows * cols, 3), rows, cols);
    Buffer w = test::to_device(dev, wq);
    const std::vector<float> x = randn((size_t)m * cols, 4);
    Buffer xb = test::to_device(dev, x);
    Buffer xq = test::poisoned(dev, m * Kernels::rounding_floats(cols) + 4);
    test::run(dev, [&](CommandList& cl) { K.round_rows(cl, view(xb), 0, view(xq), 0, cols, m); });
    const std::vector<float> xr = test::round_x_bytes(x.data(), x.size()).values;
    Pipelines& pipes = *test::env().pipes;
    for (bool bytes : {false, true})
        for (uint32_t wg : {32u, 128u}) {
            const std::string name = std::string("gemv_batch_q4_k") + (bytes ? "_i8" : "");
            if (find_module(name).empty()) continue;
            struct Push {  // gemv_batch.comp's
                uint32_t ncols, nrows, row_bytes, x_off, y_off, mode, nvec, span;
            } p{cols, rows, (uint32_t)row_size(t, cols), 0, 0, 0, m, 1};
            const Kernel& k = pipes.get(name, 3, sizeof(Push), {wg, k_rows, 1, 1, m, 0, wg});
            Buffer y = test::poisoned(dev, (size_t)m * rows + 4);
            test::run(dev, [&](CommandList& cl) {
                cl.dispatch(k, {view(w), bytes ? view(xq) : view(xb), view(y)}, p,
                            (rows + k_rows - 1) / k_rows);
            });
            const auto out = test::from_device<float>(dev, y, (size_t)m * rows + 4);
            for (uint32_t i = 0; i < 4; ++i)
                ASSERT_EQ(test::bits(out[(size_t)m * rows + i]), test::kPoison) << "wrote past";
            const std::vector<float>& xs = bytes ? xr : x;
            for (uint32_t v = 0; v < m; ++v)
                for (uint32_t r = 0; r < rows; ++r) {
                    double ref = 0, mag = 0;
                    for (uint32_t c = 0; c < cols; ++c) {
                        const double q =
                            (double)deq[(size_t)r * cols + c] * xs[(size_t)v * cols + c];
                        ref += q;
                        mag += std::fabs(q);
                    }
                    ASSERT_NEAR(out[(size_t)v * rows + r], ref, (bytes ? 1e-4 : 1e-5) * mag + 1e-5)
                        << (bytes ? "bytes" : "F32 x") << " threads " << wg << " vector " << v
                        << " row " << r;
                }
        }
}

// The skinny GEMM's parts of K (GemmKernels::skinny_shape, the launcher's rule): never more as the
// rows of X grow (longer products a block), at least four blocks a part where K splits, and the
// parts' scratch sized for every tile's partial sums.
TEST(SkinnyGemmShape, PartsFallAsRowsGrowAndKeepFourBlocks) {
    VK_TEST_DEVICE();
    for (auto [rows, cols] : {std::pair{12288u, 4096u}, {4096u, 12288u}, {4096u, 4096u}}) {
        uint32_t last = ~0u;
        for (uint32_t m : {9u, 16u, 32u, 48u, 64u, 128u}) {
            const Kernels::SkinnyShape s = K.skinny_shape(rows, cols, m);
            const uint32_t parts = std::max(s.split.parts, 1u), nb = cols / 256;
            EXPECT_LE(parts, last) << rows << "x" << cols << ", " << m << " rows";
            last = parts;
            if (parts > 1) {
                EXPECT_GE(s.split.k_split / 256, 4u) << rows << "x" << cols << ", " << m;
                EXPECT_EQ((nb + s.split.k_split / 256 - 1) / (s.split.k_split / 256), parts);
                const uint64_t tiles = (rows + 32 * s.rt - 1) / (32 * s.rt) * s.y_tiles;
                EXPECT_EQ(s.split.need.parts, tiles * parts * 16 * s.mt * 32 * s.rt * 4);
            }
            EXPECT_EQ(s.mt, std::min(4u, (m + 15) / 16));
            EXPECT_GE(s.y_tiles * 16 * s.mt, m);
        }
    }
}

// Few weight rows over short rows (the 0.8B's projections, 1,024 rows of 2,048 or 3,584): over one
// tile of X (up to 16 rows), where four blocks a part would leave the grid under half the
// multiprocessors, parts of fewer blocks (Tuning::gemm_skinny_fill) make it larger, up to a
// block a part; over more rows, elsewhere, and with the rule off, the parts are as before.
TEST(SkinnyGemmShape, FewShortRowsSplitFinerToFillTheDevice) {
    VK_TEST_DEVICE();
    const uint32_t sms = dev.features().sm_count ? dev.features().sm_count : 16;
    auto parts = [](const Kernels::SkinnyShape& s) { return std::max(s.split.parts, 1u); };
    for (auto [rows, cols] : {std::pair{512u, 1024u}, {1024u, 2048u}, {1024u, 3584u}}) {
        for (uint32_t m : {8u, 16u, 32u, 64u}) {
            const uint32_t nb = cols / 256;
            Kernels::SkinnyShape before;
            {
                test::Scoped fill(K.tuning.gemm_skinny_fill, false);
                before = K.skinny_shape(rows, cols, m);
            }
            const Kernels::SkinnyShape s = K.skinny_shape(rows, cols, m);
            ASSERT_EQ(s.rt, before.rt);
            const uint32_t tiles = (rows + 32 * s.rt - 1) / (32 * s.rt) * s.y_tiles;
            if (parts(before) > 1) EXPECT_GE(before.split.k_split / 256, 4u);
            EXPECT_LE(parts(s), nb);
            if (m <= 16 && tiles * parts(before) < sms / 2 && parts(before) < nb) {
                EXPECT_GT(parts(s), parts(before)) << rows << "x" << cols << ", " << m << " rows";
                EXPECT_EQ(s.split.need.parts,
                          (uint64_t)tiles * parts(s) * 16 * s.mt * 32 * s.rt * 4);
            } else {
                EXPECT_EQ(parts(s), parts(before)) << rows << "x" << cols << ", " << m << " rows";
            }
        }
    }
}

// The skinny GEMM's tiles of weight rows (the launcher's rule, measured on an H100: four over
// one tile of X, two over more): two where four would not fit the device's shared memory (a
// stage of 32 · RT weight rows and 16 · MT rows of X, 17 chunks of 16 bytes each), and a
// forced four taken only where it fits.
TEST(SkinnyGemmShape, FourWeightTilesOverOneTileOfXWhereTheyFit) {
    VK_TEST_DEVICE();
    const uint32_t shared = dev.features().max_shared_memory;
    auto fits = [&](const Kernels::SkinnyShape& s) {
        return (32 * s.rt + 16 * s.mt) * 17 * 16 + 16 <= shared;
    };
    for (uint32_t forced : {0u, 4u}) {
        test::Scoped rt_scope(K.tuning.gemm_skinny_rt, forced);
        for (uint32_t m = 1; m <= 256; ++m) {
            const Kernels::SkinnyShape s = K.skinny_shape(4096, 4096, m);
            const uint32_t want = forced ? forced : s.mt == 1 ? 4 : 2;
            EXPECT_EQ(s.rt, fits({.rt = want, .mt = s.mt, .y_tiles = 0, .split = {}}) ? want : 2u)
                << m << " rows, forced " << forced;
            EXPECT_TRUE(fits(s) || s.rt == 2) << m << " rows: four tiles past the shared memory";
        }
    }
}

// The F16 copy the cooperative-matrix tiles read: every value within one rounding step of the
// host conversion (the device may round either way), nothing written past n.
TEST(F16Copy, MatchesHostRounding) {
    VK_TEST_DEVICE();
    const uint32_t n = 8 * 37, x_off = 3;
    std::vector<float> x = randn(n + x_off, 21);
    Buffer xb = test::to_device(dev, x);
    Buffer h = test::poisoned(dev, n / 2 + 4);
    test::run(dev, [&](CommandList& cl) { K.f16_copy(cl, view(xb), x_off, view(h), n); });
    auto out = test::from_device<uint16_t>(dev, h, n + 8);
    for (uint32_t i = 0; i < n; ++i)
        ASSERT_LE(std::abs((int)out[i] - (int)f32_to_f16(x[x_off + i])), 1)
            << "value " << i << " = " << x[x_off + i];
    for (uint32_t i = n; i < n + 8; ++i) ASSERT_EQ(out[i], 0x7fc0 * (i % 2)) << "wrote past n";
    EXPECT_THROW(K.f16_copy(*std::make_unique<CommandList>(dev), view(xb), 0, view(h), 12), Error);
}

// The F16 expansion of weight rows the NV tiles multiply: every value within one F16 rounding
// step of the dequantized reference, nothing written past the matrix; Q4_K and Q6_K by 16-byte
// chunks and 64 values a thread (Tuning::dequant_k_wide), also over several tiles of rows, the
// last one partial.
TEST(DequantF16, MatchesDequantizedRows) {
    VK_TEST_DEVICE();
    auto cases = test::small_matrices();
    cases.push_back({QType::Q4_K, 70, 768});
    cases.push_back({QType::Q4_K, 64, 256});
    cases.push_back({QType::Q6_K, 45, 512});
    for (auto [t, rows, cols] : cases)
        for (bool wide : {true, false}) {
            if (!wide && t != QType::Q4_K && t != QType::Q6_K) continue;
            test::Scoped wide_scope(K.tuning.dequant_k_wide, wide);
            std::vector<float> wf = randn((size_t)rows * cols, rows + cols);
            const auto [wq, deq] = test::quantize_rows(t, wf, rows, cols);
            Buffer w = test::to_device(dev, wq);
            const size_t n = (size_t)rows * cols;
            Buffer h = test::poisoned(dev, n / 2 + 4);
            test::run(dev,
                      [&](CommandList& cl) { K.dequant_f16(cl, t, view(w), rows, cols, view(h)); });
            auto out = test::from_device<uint16_t>(dev, h, n + 8);
            for (size_t i = 0; i < n; ++i)
                ASSERT_LE(std::abs((int)out[i] - (int)f32_to_f16(deq[i])), 1)
                    << qtype_name(t) << (wide ? " 64 a thread" : "") << " element " << i << " = "
                    << deq[i];
            for (size_t i = n; i < n + 8; ++i)
                ASSERT_EQ(out[i], 0x7fc0 * (i % 2))
                    << qtype_name(t) << (wide ? " 64 a thread" : "") << " wrote past the matrix";
        }
}

}  // namespace
}  // namespace dl::vk
