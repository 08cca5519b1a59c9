// Kernels against CPU references (quant::dequantize for the block formats, plain loops for the
// rest): outputs poisoned with NaN before the run, every element checked, odd sizes, and the
// neighbours of the written range checked untouched.
#include <gtest/gtest.h>
#include <array>

#include <bit>
#include <cctype>
#include <cmath>
#include <functional>
#include <random>

#include "core/half.h"
#include "cpu/deltanet.h"
#include "quant/quant.h"
#include "vk_test.h"

namespace dl::vk {
namespace {

using test::randn;

struct GemvCase {
    QType type;
    uint32_t rows, cols;
};

// Records one GEMV (Kernels::gemv, or a chosen module and shape of gemv.comp).
using GemvRecord = std::function<void(CommandList&, QType, View w, uint32_t rows, uint32_t cols,
                                      View x, uint32_t x_off, View y, uint32_t y_off, bool acc)>;

// Runs the GEMV on random weights quantized by the CPU code (so the blocks are the real format)
// in write and accumulate mode, and checks every row against a double-precision dot product of
// the CPU-dequantized weights, and that nothing around the written rows is touched. x_bytes:
// the kernel rounds x to bytes (gemv.comp's X_INT8), so the reference takes x rounded the same
// way, and allows a few values rounded the other way (see test::round_x_bytes). norm_w: the
// kernel takes x before an RMSNorm with these weights (gemv.comp NORM_IN), the reference the
// normalized x. given: the x buffer's floats (x_off of them before x) and the cols values the
// kernel is to multiply by, in place of random x.
struct GivenX {
    std::vector<float> buffer, values;
};
void check_gemv(Device& dev, const GemvRecord& record, QType t, uint32_t rows, uint32_t cols,
                uint32_t x_off, bool x_bytes = false, const std::vector<float>* norm_w = nullptr,
                float eps = 0, const GivenX* given = nullptr) {
    ASSERT_TRUE(quant::can_quantize(t));
    std::vector<float> wf = randn((size_t)rows * cols, 7 + rows * 31 + cols);
    auto [wq, deq] = test::quantize_rows(t, wf, rows, cols);
    // Away from unit scale where a norm follows, so a missing or doubled normalization shows.
    std::vector<float> x = given ? given->buffer : randn(cols + x_off, 99, norm_w ? 3.f : 1.f);
    const uint32_t y_off = 3;
    // (A given buffer may be shorter than x_off + cols floats: x rounded to bytes.)
    std::vector<float> xr = given ? given->values
                            : norm_w
                                ? test::rms_normed(x.data() + x_off, *norm_w, eps)
                                : std::vector<float>(x.begin() + x_off, x.begin() + x_off + cols);
    std::vector<float> dx(cols, 0.f);
    if (x_bytes)
        std::tie(xr, dx) = [&] {
            auto b = test::round_x_bytes(xr.data(), cols);
            return std::make_pair(b.values, b.scale);
        }();

    // Reference in double, and the scale of each sum for the tolerance.
    std::vector<double> ref(rows), mag(rows), flip(rows);
    for (uint32_t r = 0; r < rows; ++r)
        for (uint32_t c = 0; c < cols; ++c) {
            const double w = deq[(size_t)r * cols + c];
            ref[r] += w * xr[c];
            mag[r] += std::fabs(w * xr[c]);
            flip[r] = std::max(flip[r], std::fabs(w) * dx[c]);
        }

    // quantize_rows pads the blocks by a word: the last (unaligned) block's reads stay inside.
    Buffer w = test::to_device(dev, wq);
    Buffer xb = test::to_device(dev, x);
    for (bool acc : {false, true}) {
        Buffer y = test::poisoned(dev, rows + y_off + 4);
        std::vector<float> init(rows);
        if (acc) {
            init = randn(rows, 5);
            dev.upload(y, y_off * 4, init.data(), rows * 4);
        }
        test::run(dev, [&](CommandList& cl) {
            record(cl, t, view(w), rows, cols, view(xb), x_off, view(y), y_off, acc);
        });
        auto out = test::from_device<float>(dev, y, rows + y_off + 4);
        for (uint32_t i = 0; i < y_off; ++i)
            EXPECT_EQ(test::bits(out[i]), test::kPoison) << "wrote before y_off";
        for (uint32_t i = 0; i < 4; ++i)
            EXPECT_EQ(test::bits(out[y_off + rows + i]), test::kPoison) << "wrote past rows";
        for (uint32_t r = 0; r < rows; ++r) {
            float got = out[y_off + r];
            ASSERT_TRUE(std::isfinite(got)) << qtype_name(t) << " row " << r;
            double want = ref[r] + init[r];
            ASSERT_NEAR(got, want, 1e-5 * mag[r] + 1e-5 + 4 * flip[r])
                << qtype_name(t) << " row " << r << " acc " << acc << " x_off " << x_off;
        }
    }
}

// Kernels::gemv as check_gemv records it (share: its part of a stage it shares).
GemvRecord launcher(Kernels& K, GemvPart share = {}) {
    return [&K, share](CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                       uint32_t x_off, View y, uint32_t y_off, bool acc) {
        K.gemv(cl, {.type = t,
                    .w = w,
                    .rows = rows,
                    .cols = cols,
                    .x = x,
                    .x_off = x_off,
                    .y = y,
                    .y_off = y_off,
                    .accumulate = acc,
                    .share = share});
    };
}

class Gemv : public ::testing::TestWithParam<GemvCase> {};

TEST_P(Gemv, MatchesDequantizedReference) {
    VK_TEST_DEVICE();
    const auto [t, rows, cols] = GetParam();
    const GemvRecord rec = launcher(K);
    // x_off 5 reads x float by float, 8 as aligned vec4s. The launcher's own path for this
    // device: over x rounded to bytes where it picks that.
    const bool bytes = K.gemv_x_for(t, cols) == Kernels::GemvX::bytes;
    for (uint32_t x_off : {5u, 8u}) check_gemv(dev, rec, t, rows, cols, x_off, bytes);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, Gemv,
    ::testing::Values(GemvCase{QType::F32, 7, 45}, GemvCase{QType::F32, 64, 256},
                      GemvCase{QType::F16, 5, 77}, GemvCase{QType::F16, 33, 128},
                      GemvCase{QType::Q4_0, 9, 160}, GemvCase{QType::Q8_0, 11, 96},
                      GemvCase{QType::Q8_0, 130, 1024}, GemvCase{QType::Q4_K, 3, 256},
                      GemvCase{QType::Q4_K, 67, 768}, GemvCase{QType::Q5_K, 13, 512},
                      GemvCase{QType::Q6_K, 1, 256}, GemvCase{QType::Q6_K, 37, 768},
                      // One block a row, several rows a workgroup with a short last group.
                      GemvCase{QType::Q4_0, 6, 32}, GemvCase{QType::Q8_0, 3, 32},
                      GemvCase{QType::Q5_K, 7, 256}, GemvCase{QType::F16, 2, 1},
                      // Aligned F32 / F16 rows: vector loads, then a short last unit.
                      GemvCase{QType::F16, 3, 200}, GemvCase{QType::F32, 4, 100},
                      // Big shapes: many workgroups, several passes of the workgroup over a row.
                      GemvCase{QType::Q4_K, 4096, 1024}, GemvCase{QType::Q4_K, 21, 12288},
                      GemvCase{QType::Q6_K, 9, 12288}, GemvCase{QType::Q8_0, 5, 12288},
                      GemvCase{QType::Q5_K, 6, 12288}, GemvCase{QType::F32, 3, 12289}),
    test::TypeRowsColsName());

// The block formats through each way of reading x the launcher has (Kernels::gemv_x): the
// global F32 reads, x rounded to bytes (integer dot products, where the device and the build
// have them).
void check_gemv_path(Kernels& K, Device& dev, const GemvCase& c, Kernels::GemvX path,
                     GemvPart share = {}) {
    test::Scoped scope(K.tuning.gemv_x, path);
    if (K.gemv_x_for(c.type, c.cols) != path) GTEST_SKIP() << "not on this device or build";
    const GemvRecord rec = launcher(K, share);
    for (uint32_t x_off : {5u, 8u})
        check_gemv(dev, rec, c.type, c.rows, c.cols, x_off, path == Kernels::GemvX::bytes);
}

class GemvXPaths : public ::testing::TestWithParam<GemvCase> {};

TEST_P(GemvXPaths, GlobalMatchesReference) {
    VK_TEST_DEVICE();
    check_gemv_path(K, dev, GetParam(), Kernels::GemvX::global);
}
// Q4_K and Q6_K rows (held in tiles) on the tiled GEMV and on gemv.comp (Kernels::gemv_tiled);
// the tiled GEMV reads x from floats only 16-byte aligned, so x_off 5 takes gemv.comp either way.
TEST_P(GemvXPaths, BytesMatchRoundedReference) {
    VK_TEST_DEVICE();
    for (auto route : {Kernels::GemvTiled::on, Kernels::GemvTiled::off}) {
        test::Scoped tiled(K.tuning.gemv_tiled, route);
        check_gemv_path(K, dev, GetParam(), Kernels::GemvX::bytes);
        if (HasFatalFailure() || IsSkipped()) return;
    }
}
// The tiled GEMV with each tile's runs split over 2 and 3 workgroups (Kernels::gemv_split, the
// GEMVs that add to y), the last part to finish adding the parts: over 3, a Q4_K row of one
// block leaves parts with no runs. Then 2 parts where rows of 16+ runs take one workgroup of
// sixteen slots instead (Kernels::gemv_wide_tiles; the 12288-value rows). The scratch must be
// zero again after each GEMV.
TEST_P(GemvXPaths, BytesOnTheTiledGemvSplitOverWorkgroupsMatchRoundedReference) {
    VK_TEST_DEVICE();
    const GemvCase c = GetParam();
    const uint64_t bytes = Kernels::split_bytes(c.rows);
    Buffer split = dev.create_buffer(bytes, MemoryKind::device);
    dev.fill(split, 0, bytes, 0);
    test::Scoped tiled(K.tuning.gemv_tiled, Kernels::GemvTiled::on);
    test::Scoped scratch(K.gemv_split, view(split));
    for (auto [parts, wide] : {std::pair{2u, false}, std::pair{3u, false}, std::pair{2u, true}}) {
        test::Scoped n(K.tuning.gemv_split_parts, parts);
        test::Scoped w(K.tuning.gemv_wide_tiles, wide);
        check_gemv_path(K, dev, c, Kernels::GemvX::bytes);
        if (HasFatalFailure() || IsSkipped()) return;
        const auto words = test::from_device<uint32_t>(dev, split, bytes / 4);
        for (size_t i = 0; i < words.size() && i < (c.rows + 31) / 32; ++i)
            ASSERT_EQ(words[i], 0u) << "tile " << i << "'s count not reset";
    }
}

// The tiled GEMV over a grid of fewer workgroups than tiles: each walks every grid-th tile over
// the x it rounded once.
TEST_P(GemvXPaths, BytesOnTheTiledGemvOverASmallGridMatchRoundedReference) {
    VK_TEST_DEVICE();
    test::Scoped tiled(K.tuning.gemv_tiled, Kernels::GemvTiled::on);
    test::Scoped grid(K.tuning.gemv_grid, 3);
    check_gemv_path(K, dev, GetParam(), Kernels::GemvX::bytes);
}
// Workgroups of several row groups over one rounded x (Kernels::gemv_groups): rows of the last
// workgroup's later groups past the end, groups reduced apart.
TEST_P(GemvXPaths, BytesInRowGroupsMatchRoundedReference) {
    VK_TEST_DEVICE();
    test::Scoped tiled(K.tuning.gemv_tiled, Kernels::GemvTiled::off);  // gemv.comp's shapes
    test::Scoped groups(K.tuning.gemv_groups, 4);
    check_gemv_path(K, dev, GetParam(), Kernels::GemvX::bytes);
}

// A grid of fewer workgroups than row blocks (Kernels::gemv_grid): each workgroup takes every
// grid-th block over the x it read once, ending with a short block where the rows run out.
TEST_P(GemvXPaths, GlobalOverASmallGridMatchesReference) {
    VK_TEST_DEVICE();
    test::Scoped grid(K.tuning.gemv_grid, 2);
    check_gemv_path(K, dev, GetParam(), Kernels::GemvX::global);
}
TEST_P(GemvXPaths, BytesInRowGroupsOverASmallGridMatchRoundedReference) {
    VK_TEST_DEVICE();
    test::Scoped tiled(K.tuning.gemv_tiled, Kernels::GemvTiled::off);  // gemv.comp's shapes
    test::Scoped groups(K.tuning.gemv_groups, 4);
    test::Scoped grid(K.tuning.gemv_grid, 3);
    check_gemv_path(K, dev, GetParam(), Kernels::GemvX::bytes);
}

// Slices of 32 weights everywhere, and of 64 for every Q4_K and Q6_K row however short
// (Kernels::gemv_wide; `automatic`, what the tests above run, takes 64 for Q4_K rows and Q6_K
// rows of 8192+ values), alone and over a small grid.
TEST_P(GemvXPaths, BytesInNarrowSlicesMatchRoundedReference) {
    VK_TEST_DEVICE();
    test::Scoped tiled(K.tuning.gemv_tiled, Kernels::GemvTiled::off);  // gemv.comp's shapes
    test::Scoped wide(K.tuning.gemv_wide, Kernels::GemvWide::off);
    check_gemv_path(K, dev, GetParam(), Kernels::GemvX::bytes);
}
TEST_P(GemvXPaths, BytesInWideSlicesMatchRoundedReference) {
    VK_TEST_DEVICE();
    test::Scoped tiled(K.tuning.gemv_tiled, Kernels::GemvTiled::off);  // gemv.comp's shapes
    test::Scoped wide(K.tuning.gemv_wide, Kernels::GemvWide::all);
    check_gemv_path(K, dev, GetParam(), Kernels::GemvX::bytes);
}
TEST_P(GemvXPaths, BytesInWideSlicesOverASmallGridMatchRoundedReference) {
    VK_TEST_DEVICE();
    test::Scoped tiled(K.tuning.gemv_tiled, Kernels::GemvTiled::off);  // gemv.comp's shapes
    test::Scoped wide(K.tuning.gemv_wide, Kernels::GemvWide::all);
    test::Scoped groups(K.tuning.gemv_groups, 4);
    test::Scoped grid(K.tuning.gemv_grid, 3);
    check_gemv_path(K, dev, GetParam(), Kernels::GemvX::bytes);
}

// Shapes balanced over a device of 3 workgroup slots (Kernels::gemv_balance): fewer rows a
// group, down to one, in workgroups of 4 row groups, over narrow and wide slices.
TEST_P(GemvXPaths, BytesBalancedOverFewSlotsMatchRoundedReference) {
    VK_TEST_DEVICE();
    test::Scoped tiled(K.tuning.gemv_tiled, Kernels::GemvTiled::off);  // gemv.comp's shapes
    test::Scoped slots(K.tuning.gemv_slots, 3);
    test::Scoped groups(K.tuning.gemv_groups, 4);
    for (auto wide : {Kernels::GemvWide::off, Kernels::GemvWide::all}) {
        test::Scoped w(K.tuning.gemv_wide, wide);
        check_gemv_path(K, dev, GetParam(), Kernels::GemvX::bytes);
    }
}

// A GEMV that shares its stage (Kernels::gemv's share), balanced over its part of 3 workgroup
// slots, and over its part of 16 where a GEMV of few rows takes fewer rows a group and at most
// its part of the grid: every row written, none past them.
TEST_P(GemvXPaths, BytesSharingAStageMatchRoundedReference) {
    VK_TEST_DEVICE();
    test::Scoped tiled(K.tuning.gemv_tiled, Kernels::GemvTiled::off);  // gemv.comp's shapes
    test::Scoped groups(K.tuning.gemv_groups, 4);
    for (uint32_t slots : {3u, 16u})
        for (float part : {0.3f, 0.7f}) {
            test::Scoped sl(K.tuning.gemv_slots, slots);
            check_gemv_path(K, dev, GetParam(), Kernels::GemvX::bytes, GemvPart{part});
        }
}

// The shape of a GEMV that shares its stage, on the decode GEMVs of real files over an H200
// (132 multiprocessors: 132 slots for workgroups of 1024 invocations, 264 for 512).
TEST(GemvBalance, ASharedGemvFillsOnlyThePartItWouldLeaveIdle) {
    struct Case {
        uint32_t rows, k_rows, groups, slots;
        float share;
        uint32_t want_k, want_grid;
    };
    const Case cases[] = {
        // The 0.8B's DeltaNet qkv beside z, beta and alpha (81 % of the stage's bytes): 6144 rows
        // in blocks of 8 rows in 32 groups, 24 blocks for its 107 slots. In blocks of 2 rows, 96
        // blocks in one round (2); of 1, 192 in two (2, no gain). At most 107 workgroups.
        {6144, 8, 32, 132, 0.81f, 2, 107},
        // Its z, beta and alpha (19 %): 33 blocks of 64 rows for 50 slots; 66 of 32 rows take
        // two rounds (no gain). The shape stays, at most 50 workgroups.
        {2080, 4, 16, 264, 0.19f, 4, 50},
        // The 9B's DeltaNet qkv (74 %): 128 blocks for 98 slots, as many as its part: unchanged.
        {8192, 8, 8, 132, 0.74f, 8, 0},
        // Qwen3-8B's v beside its q and k (23 %): 32 blocks for 30 slots: unchanged.
        {1024, 4, 8, 132, 0.23f, 4, 0},
        // A sliver of a stage still takes a workgroup: two blocks for one slot, unchanged.
        {32, 2, 8, 264, 0.001f, 2, 0},
        // One block of 32 rows for 3 slots: two of 16 in one round (2), four of 8 in two (2).
        {32, 4, 8, 264, 0.01f, 2, 3},
    };
    for (const Case& c : cases) {
        const auto s = Kernels::shared_shape(c.rows, c.k_rows, c.groups, c.slots, c.share);
        EXPECT_EQ(s.k_rows, c.want_k) << c.rows << " rows, share " << c.share;
        EXPECT_EQ(s.grid, c.want_grid) << c.rows << " rows, share " << c.share;
    }
}

// The balance's arithmetic on the shapes of real decode GEMVs over an H200's 264 slots (2 a
// multiprocessor): a GEMV takes as long as its busiest workgroup, rounds of blocks times rows a
// block, and a half shape is taken where it saves a tenth.
TEST(GemvBalance, HalvesRowsWhereTheBusiestWorkgroupGainsATenth) {
    // The 9B's merged input projections: 12352 rows in blocks of 4 · 8 = 386 blocks, two rounds
    // of 4 rows (8); 772 blocks of 2, three rounds (6); 1544 of 1, six rounds (6, no gain).
    EXPECT_EQ(Kernels::balanced_rows(12352, 4, 8, 264), 2u);
    // Its attention q and k, 9216 rows: 288 blocks, 2 rounds · 4 = 8; 576 -> 3 · 2 = 6; 1152 ->
    // 5 · 1 = 5.
    EXPECT_EQ(Kernels::balanced_rows(9216, 4, 8, 264), 1u);
    // The out projection, 4096 rows: 256 blocks in one round (2); 512 blocks take two (2).
    EXPECT_EQ(Kernels::balanced_rows(4096, 2, 8, 264), 2u);
    // The 0.8B's out projection, 1024 rows in groups of 16: 32 blocks (2); 64 blocks (1).
    EXPECT_EQ(Kernels::balanced_rows(1024, 2, 16, 264), 1u);
    // The 0.8B's head: 1940 blocks, 8 rounds · 8 = 64; 3880 -> 15 · 4 = 60, under a tenth.
    EXPECT_EQ(Kernels::balanced_rows(248320, 8, 16, 264), 8u);
    // One row a group stays one; one slot takes the rows in one long round either way.
    EXPECT_EQ(Kernels::balanced_rows(100, 1, 4, 264), 1u);
    EXPECT_EQ(Kernels::balanced_rows(4096, 4, 8, 1), 4u);
}

// Over the RMSNorm of x (Kernels::gemv_normed, gemv.comp NORM_IN): the launcher's shape, and row
// groups over a small grid with narrow and with wide slices.
TEST_P(GemvXPaths, BytesOverANormsInputMatchRoundedReference) {
    VK_TEST_DEVICE();
    const GemvCase c = GetParam();
    test::Scoped scope(K.tuning.gemv_x, Kernels::GemvX::bytes);
    if (K.gemv_x_for(c.type, c.cols) != Kernels::GemvX::bytes)
        GTEST_SKIP() << "not on this device or build";
    std::vector<float> nw = randn(c.cols, 31, 0.5f);
    for (float& v : nw) v += 1.f;
    Buffer nb = test::to_device(dev, nw);
    const float eps = 1e-5f;
    const GemvRecord rec = [&](CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols,
                               View x, uint32_t x_off, View y, uint32_t y_off, bool acc) {
        K.gemv_normed(cl,
                      {.type = t,
                       .w = w,
                       .rows = rows,
                       .cols = cols,
                       .x = x,
                       .x_off = x_off,
                       .y = y,
                       .y_off = y_off,
                       .accumulate = acc},
                      {view(nb), eps});
    };
    for (auto route : {Kernels::GemvTiled::on, Kernels::GemvTiled::off}) {
        test::Scoped tiled(K.tuning.gemv_tiled, route);
        for (uint32_t x_off : {5u, 8u})
            check_gemv(dev, rec, c.type, c.rows, c.cols, x_off, true, &nw, eps);
    }
    test::Scoped grid(K.tuning.gemv_grid, 3);
    check_gemv(dev, rec, c.type, c.rows, c.cols, 8, true, &nw, eps);   // the tiled GEMV's walk
    test::Scoped tiled(K.tuning.gemv_tiled, Kernels::GemvTiled::off);  // gemv.comp's shapes
    test::Scoped groups(K.tuning.gemv_groups, 4);
    for (auto wide : {Kernels::GemvWide::off, Kernels::GemvWide::all}) {
        test::Scoped w(K.tuning.gemv_wide, wide);
        check_gemv(dev, rec, c.type, c.rows, c.cols, 8, true, &nw, eps);
    }
}

// Over a Gated DeltaNet output before its gated RMSNorm (Kernels::gemv_gated, gemv.comp
// GATED_IN): x = o · w · silu(z) per value column, each head's column groups' sums of squares of
// o after it, and the reference the gated norm itself, o / sqrt(mean over the head of o² + eps)
// · w · silu(z). Heads of 16 to 128 values in 1 to 4 groups; o away from unit scale, so a factor
// missing, doubled or taken from the wrong head shows. On the tiled GEMV also over x rounded to
// bytes by the step already (DeltaNetStep::round_y, GemvRounding::x_rounded), the sums after
// the rounding.
TEST_P(GemvXPaths, BytesOverADeltaNetOutputBeforeItsGatedNormMatchReference) {
    VK_TEST_DEVICE();
    const GemvCase c = GetParam();
    test::Scoped scope(K.tuning.gemv_x, Kernels::GemvX::bytes);
    if (!K.gemv_gates(c.type, c.cols)) GTEST_SKIP() << "not on this device or build";
    const uint32_t dv = c.cols % 128 == 0 ? 128 : c.cols % 32 == 0 ? 32 : 16;
    const uint32_t heads = c.cols / dv, groups = dv >= 64 ? 4 : dv == 32 ? 2 : 1;
    const float eps = 1e-5f;
    std::vector<float> o = randn(c.cols, 41, 3.f), z = randn(c.cols, 43), nw = randn(dv, 47, 0.5f);
    for (float& v : nw) v += 1.f;
    // Head h's values scaled apart, so each head's factor differs.
    for (uint32_t i = 0; i < c.cols; ++i) o[i] *= 1.f + (float)(i / dv % 5);
    for (uint32_t x_off : {5u, 8u}) {
        GivenX g;
        g.buffer.assign(x_off, std::bit_cast<float>(test::kPoison));
        g.values.resize(c.cols);
        std::vector<double> ss(heads * groups, 0.0);
        for (uint32_t i = 0; i < c.cols; ++i) {
            const float gate = z[i] / (1.f + std::exp(-z[i])), w = nw[i % dv];
            g.buffer.push_back(o[i] * w * gate);
            ss[i / dv * groups + i % dv / (dv / groups)] += (double)o[i] * o[i];
        }
        cpu::deltanet::gated_norm({1, heads, 16, dv}, 1, o.data(), z.data(), nw.data(), eps,
                                  g.values.data());
        const uint32_t ss_off = (uint32_t)g.buffer.size();
        for (double v : ss) g.buffer.push_back((float)v);
        const Kernels::GemvGatedIn gin{ss_off, dv, groups, eps};
        const GemvRecord rec = [&](CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols,
                                   View x, uint32_t xo, View y, uint32_t y_off, bool acc) {
            K.gemv_gated(cl,
                         {.type = t,
                          .w = w,
                          .rows = rows,
                          .cols = cols,
                          .x = x,
                          .x_off = xo,
                          .y = y,
                          .y_off = y_off,
                          .accumulate = acc},
                         gin);
        };
        for (auto route : {Kernels::GemvTiled::on, Kernels::GemvTiled::off}) {
            test::Scoped tiled(K.tuning.gemv_tiled, route);
            check_gemv(dev, rec, c.type, c.rows, c.cols, x_off, true, nullptr, 0, &g);
            if (HasFatalFailure()) return;
        }
        if (x_off % 4 || !K.gemv_tiled_for(c.type, c.cols)) continue;
        // The same values rounded by the step: o · w · silu(z) in bytes, then the sums.
        const test::Rounded r = test::rounding_layout(
            std::vector<float>(g.buffer.begin() + x_off, g.buffer.begin() + x_off + c.cols));
        GivenX gr;
        gr.buffer.assign(x_off, std::bit_cast<float>(test::kPoison));
        gr.buffer.insert(gr.buffer.end(), r.layout.begin(), r.layout.end());
        Kernels::GemvGatedIn ginr = gin;
        ginr.ss_off = (uint32_t)gr.buffer.size();
        for (double v : ss) gr.buffer.push_back((float)v);
        gr.values = g.values;
        const GemvRecord recr = [&](CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols,
                                    View x, uint32_t xo, View y, uint32_t y_off, bool acc) {
            Kernels::GemvRounding rd;
            rd.x_rounded = true;
            K.gemv_gated(cl,
                         {.type = t,
                          .w = w,
                          .rows = rows,
                          .cols = cols,
                          .x = x,
                          .x_off = xo,
                          .y = y,
                          .y_off = y_off,
                          .accumulate = acc,
                          .rounding = &rd},
                         ginr);
        };
        check_gemv(dev, recr, c.type, c.rows, c.cols, x_off, true, nullptr, 0, &gr);
        if (HasFatalFailure()) return;
    }
}

// A GEMV over a norm's input only runs over x in bytes, with its norm weights an aligned view of
// a whole row: anything else is a clear error at recording, not a wrong or unchecked read.
TEST(GemvXPaths, NormInRefusesWhatItCannotRun) {
    VK_TEST_DEVICE();
    Buffer w = dev.create_buffer(1 << 16, MemoryKind::device);
    Buffer a = test::poisoned(dev, 4096);
    Buffer nw = test::poisoned(dev, 1024);
    CommandList cl(dev);
    cl.begin(true);
    // The error names the GEMV over a norm's input, whatever else would have failed after it.
    auto refuses = [&](QType t, const Kernels::GemvNormIn& norm) {
        try {
            K.gemv_normed(cl,
                          {.type = t,
                           .w = view(w),
                           .rows = 8,
                           .cols = 256,
                           .x = view(a),
                           .x_off = 0,
                           .y = view(a),
                           .y_off = 512,
                           .accumulate = false},
                          norm);
        } catch (const Error& e) {
            return std::string(e.what()).find("norm's input") != std::string::npos;
        }
        return false;
    };
    const Kernels::GemvNormIn norm{view(nw), 1e-6f};
    EXPECT_TRUE(refuses(QType::F32, norm));  // F32 weights read x as floats
    {
        test::Scoped scope(K.tuning.gemv_x, Kernels::GemvX::global);
        EXPECT_TRUE(refuses(QType::Q8_0, norm));
    }
    test::Scoped scope(K.tuning.gemv_x, Kernels::GemvX::bytes);
    if (K.gemv_x_for(QType::Q8_0, 256) == Kernels::GemvX::bytes) {
        EXPECT_TRUE(refuses(QType::Q8_0, {view(nw, 0, 128 * 4), 1e-6f}));  // half a row
    }
    cl.end();
}

// A NaN or an infinity in x makes every row NaN or infinite on either path (the byte path
// cannot round them, so it must not hide them behind a finite scale).
TEST(GemvXPaths, NonFiniteXReachesEveryRow) {
    VK_TEST_DEVICE();
    const uint32_t rows = 9, cols = 4096;
    auto [wq, deq] = test::quantize_rows(QType::Q4_K, randn((size_t)rows * cols, 3), rows, cols);
    Buffer w = test::to_device(dev, wq);
    for (Kernels::GemvX path : {Kernels::GemvX::global, Kernels::GemvX::bytes}) {
        test::Scoped scope(K.tuning.gemv_x, path);
        if (K.gemv_x_for(QType::Q4_K, cols) != path) continue;
        for (float bad : {std::nanf(""), INFINITY}) {
            std::vector<float> x = randn(cols, 4);
            x[1000] = bad;
            Buffer xb = test::to_device(dev, x);
            // Finite before the run (the usual poison is a NaN), so an unwritten row fails.
            Buffer y = test::to_device(dev, std::vector<float>(rows, 1.f));
            test::run(dev, [&](CommandList& cl) {
                K.gemv(cl, {.type = QType::Q4_K,
                            .w = view(w),
                            .rows = rows,
                            .cols = cols,
                            .x = view(xb),
                            .x_off = 0,
                            .y = view(y),
                            .y_off = 0,
                            .accumulate = false});
            });
            auto out = test::from_device<float>(dev, y, rows);
            for (uint32_t r = 0; r < rows; ++r)
                EXPECT_FALSE(std::isfinite(out[r]))
                    << "row " << r << " x[1000] = " << bad << " path " << (int)path;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, GemvXPaths,
    ::testing::Values(GemvCase{QType::Q4_0, 9, 160}, GemvCase{QType::Q8_0, 11, 96},
                      GemvCase{QType::Q8_0, 130, 1024}, GemvCase{QType::Q4_K, 3, 256},
                      GemvCase{QType::Q4_K, 67, 768}, GemvCase{QType::Q5_K, 13, 512},
                      GemvCase{QType::Q6_K, 1, 256}, GemvCase{QType::Q6_K, 37, 768},
                      // One block a row; 8 rows a workgroup, so short last groups.
                      GemvCase{QType::Q4_0, 6, 32}, GemvCase{QType::Q8_0, 3, 32},
                      GemvCase{QType::Q5_K, 7, 256},
                      // Many workgroups; rows that take several passes of the workgroup.
                      GemvCase{QType::Q4_K, 4096, 1024}, GemvCase{QType::Q4_K, 21, 12288},
                      GemvCase{QType::Q6_K, 9, 12288}, GemvCase{QType::Q8_0, 5, 12288},
                      GemvCase{QType::Q5_K, 6, 12288},
                      // The 9B's rows of 4096 values (eight slots of runs on the tiled GEMV),
                      // a tile and a row past two.
                      GemvCase{QType::Q4_K, 33, 4096}, GemvCase{QType::Q6_K, 65, 4096}),
    test::TypeRowsColsName());

// gemv.comp's other shapes, dispatched directly: the shared-memory reduction (the module without
// subgroup arithmetic), word loads instead of 16-byte ones (W16 = 0, what a weight view at an
// offset of 4 mod 16 gets), and other workgroup sizes and rows per workgroup.
struct GemvShape {
    QType type;
    uint32_t rows, cols, wg, rows_per_group, w16;
    bool subgroup;
    Kernels::GemvX x = Kernels::GemvX::global;  // bytes: the X_INT8 module
};

class GemvModule : public ::testing::TestWithParam<GemvShape> {};
constexpr Kernels::GemvX kBytes = Kernels::GemvX::bytes;

TEST_P(GemvModule, MatchesDequantizedReference) {
    VK_TEST_DEVICE();
    const GemvShape s = GetParam();
    if (s.subgroup && !dev.features().subgroup_arithmetic) GTEST_SKIP() << "no subgroup arithmetic";
    if (s.subgroup && s.x == Kernels::GemvX::bytes && !dev.features().subgroup_shuffle)
        GTEST_SKIP() << "no subgroup shuffles";
    if (s.wg > dev.features().max_workgroup_invocations) GTEST_SKIP() << "workgroup too large";
    std::string name = "gemv_" + std::string(qtype_name(s.type));
    for (char& c : name) c = (char)std::tolower((unsigned char)c);
    const bool bytes = s.x == Kernels::GemvX::bytes;
    if (bytes) name += "_i8";
    if (s.subgroup) name += "_sg";
    if (bytes && (!dev.features().integer_dot || find_module(name).empty()))
        GTEST_SKIP() << "no integer dot products here";
    Pipelines& pipes = *test::env().pipes;
    auto rec = [&](CommandList& cl, QType t, View w, uint32_t rows, uint32_t cols, View x,
                   uint32_t x_off, View y, uint32_t y_off, bool acc) {
        struct Push {  // gemv.comp's push constants
            uint32_t ncols, nrows, row_bytes, x_off, y_off, mode, xr_off;
        } p{cols, rows, (uint32_t)row_size(t, cols), x_off, y_off, acc ? 1u : 0u, 0};
        uint32_t x16 = x_off % 4 == 0 ? 1 : 0;
        uint32_t w2 = t == QType::Q6_K && p.row_bytes % 4 != 0;  // gemv.comp W2
        const Kernel& k = pipes.get(name, 3, sizeof(Push),
                                    {s.wg, s.rows_per_group, s.w16, x16, cols / 32, 0, 1, w2});
        cl.dispatch(k, {w, x, y}, p, (rows + s.rows_per_group - 1) / s.rows_per_group);
    };
    for (uint32_t x_off : {5u, 8u}) check_gemv(dev, rec, s.type, s.rows, s.cols, x_off, bytes);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemvModule,
    ::testing::Values(GemvShape{QType::Q4_K, 67, 2048, 32, 4, 0, false},
                      GemvShape{QType::Q4_K, 67, 2048, 64, 3, 1, false},
                      GemvShape{QType::Q4_K, 5, 768, 16, 1, 0, true},
                      GemvShape{QType::Q5_K, 13, 1024, 32, 2, 0, false},
                      GemvShape{QType::Q6_K, 37, 768, 64, 4, 0, false},
                      GemvShape{QType::Q6_K, 11, 2048, 32, 5, 1, true},
                      GemvShape{QType::Q8_0, 11, 96, 32, 4, 0, false},
                      GemvShape{QType::Q4_0, 9, 160, 128, 2, 0, false},
                      GemvShape{QType::F16, 5, 77, 32, 3, 0, false},
                      GemvShape{QType::F16, 6, 136, 32, 4, 0, false},
                      GemvShape{QType::F32, 7, 45, 64, 4, 0, true},
                      // x in bytes: word loads, the shared-memory reduction, x rounded over
                      // several passes of the workgroup.
                      GemvShape{QType::Q4_K, 67, 2048, 32, 4, 0, false, kBytes},
                      GemvShape{QType::Q5_K, 13, 1024, 64, 3, 1, true, kBytes},
                      GemvShape{QType::Q6_K, 11, 2048, 32, 5, 0, false, kBytes},
                      GemvShape{QType::Q8_0, 11, 96, 16, 16, 0, true, kBytes},
                      GemvShape{QType::Q4_0, 9, 160, 128, 2, 0, false, kBytes}),
    [](const auto& info) {
        const GemvShape& s = info.param;
        return std::string(qtype_name(s.type)) + "_" + std::to_string(s.rows) + "x" +
               std::to_string(s.cols) + "_wg" + std::to_string(s.wg) + "_r" +
               std::to_string(s.rows_per_group) + "_w16_" + std::to_string(s.w16) +
               (s.subgroup ? "_sg" : "_tree") + (s.x == kBytes ? "_i8" : "");
    });

void rms_norm_rows(Device& dev, Kernels& K, uint32_t n, uint32_t x_stride, uint32_t y_stride,
                   uint32_t x_off, uint32_t y_off);

// Rows read as floats (offsets and strides not multiples of 4), then as vec4s, which rows of
// 100 and 4100 values (past one vec4 for each of the 256 threads) take.
TEST(VulkanKernels, RmsNormStridedRows) {
    VK_TEST_DEVICE();
    for (auto [n, x_stride, y_stride, x_off, y_off] : {std::array<uint32_t, 5>{100, 130, 111, 7, 2},
                                                       {100, 132, 112, 8, 4},
                                                       {4100, 4104, 4100, 4, 0}})
        rms_norm_rows(dev, K, n, x_stride, y_stride, x_off, y_off);
}

void rms_norm_rows(Device& dev, Kernels& K, uint32_t n, uint32_t x_stride, uint32_t y_stride,
                   uint32_t x_off, uint32_t y_off) {
    SCOPED_TRACE(::testing::Message() << "rows of " << n << ", strides " << x_stride << " / "
                                      << y_stride << ", offsets " << x_off << " / " << y_off);
    const uint32_t nrows = 5;
    const float eps = 1e-6f;
    std::vector<float> x = randn(x_off + nrows * x_stride, 3, 2.f);
    std::vector<float> w = randn(n, 4);
    Buffer xb = test::to_device(dev, x), wb = test::to_device(dev, w);
    size_t ny = y_off + nrows * y_stride;
    Buffer y = test::poisoned(dev, ny);
    test::run(dev, [&](CommandList& cl) {
        K.rms_norm(cl, {.w = view(wb),
                        .x = view(xb),
                        .x_off = x_off,
                        .x_stride = x_stride,
                        .y = view(y),
                        .y_off = y_off,
                        .y_stride = y_stride,
                        .n = n,
                        .nrows = nrows,
                        .eps = eps});
    });
    auto out = test::from_device<float>(dev, y, ny);
    for (uint32_t r = 0; r < nrows; ++r) {
        double ss = 0;
        for (uint32_t i = 0; i < n; ++i)
            ss += (double)x[x_off + r * x_stride + i] * x[x_off + r * x_stride + i];
        double scale = 1.0 / std::sqrt(ss / n + eps);
        for (uint32_t i = 0; i < n; ++i) {
            float got = out[y_off + r * y_stride + i];
            double want = x[x_off + r * x_stride + i] * scale * w[i];
            ASSERT_NEAR(got, want, 1e-5 * (std::fabs(want) + 1)) << r << "," << i;
        }
        // The gap between strided rows is never written.
        for (uint32_t i = n; i < y_stride && y_off + r * y_stride + i < ny; ++i)
            ASSERT_EQ(test::bits(out[y_off + r * y_stride + i]), test::kPoison);
    }
}

void rms_norm_f16_rows(Device& dev, Kernels& K, uint32_t x_off);

// The norm that also writes its rows' F16 copy (a window's norm before GEMM tiles): the same
// rows as the plain norm, and halves equal to what f16_copy makes of them; nothing past them.
TEST(VulkanKernels, RmsNormWritesTheF16CopyOfItsRows) {
    VK_TEST_DEVICE();
    for (uint32_t x_off : {5u, 8u}) {  // rows read as floats, then as vec4s
        SCOPED_TRACE(::testing::Message() << "x at " << x_off);
        rms_norm_f16_rows(dev, K, x_off);
        if (HasFatalFailure()) return;
    }
}

void rms_norm_f16_rows(Device& dev, Kernels& K, uint32_t x_off) {
    const uint32_t n = 104, nrows = 3;
    std::vector<float> x = randn(x_off + nrows * n, 13, 2.f), w = randn(n, 14);
    Buffer xb = test::to_device(dev, x), wb = test::to_device(dev, w);
    Buffer plain = test::poisoned(dev, nrows * n), fused = test::poisoned(dev, nrows * n);
    Buffer h = test::poisoned(dev, nrows * n / 2 + 4), copy = test::poisoned(dev, nrows * n / 2);
    auto norm = [&](Buffer& y, View hv) {
        return Kernels::RmsNorm{.w = view(wb),
                                .x = view(xb),
                                .x_off = x_off,
                                .x_stride = n,
                                .y = view(y),
                                .y_off = 0,
                                .y_stride = n,
                                .n = n,
                                .nrows = nrows,
                                .eps = 1e-6f,
                                .h = hv};
    };
    test::run(dev, [&](CommandList& cl) {
        K.rms_norm(cl, norm(plain, {}));
        K.rms_norm(cl, norm(fused, view(h)));
        cl.barrier();
        K.f16_copy(cl, view(plain), 0, view(copy), nrows * n);
    });
    auto a = test::from_device<float>(dev, plain, nrows * n);
    auto b = test::from_device<float>(dev, fused, nrows * n);
    for (uint32_t i = 0; i < nrows * n; ++i) ASSERT_EQ(test::bits(b[i]), test::bits(a[i])) << i;
    auto hs = test::from_device<uint16_t>(dev, h, nrows * n + 8);
    auto cs = test::from_device<uint16_t>(dev, copy, nrows * n);
    for (uint32_t i = 0; i < nrows * n; ++i) ASSERT_EQ(hs[i], cs[i]) << "half " << i;
    for (uint32_t i = nrows * n; i < nrows * n + 8; ++i)
        ASSERT_EQ(hs[i], 0x7fc0 * (i % 2)) << "wrote past the rows";
    Buffer odd = test::poisoned(dev, 16);
    Kernels::RmsNorm r = norm(plain, view(odd));
    r.n = 7;
    EXPECT_THROW(K.rms_norm(*std::make_unique<CommandList>(dev), r), Error);
}

// The trace of a recorded command (DELTALLM_VK_TRACE): a line at each mark with the dispatches
// since the one before, kernel[specialization constants], workgroup counts, push-constant words
// and bound views, and one at end() for those after the last mark; nothing while tracing is off,
// and begin() starts afresh.
TEST(VulkanKernels, CommandTraceNamesEachStagesDispatches) {
    VK_TEST_DEVICE();
    const uint32_t n = 64;
    Buffer xb = test::to_device(dev, randn(5 * n, 3)), wb = test::to_device(dev, randn(n, 4));
    Buffer y = test::poisoned(dev, 5 * n);
    CommandList cl(dev);
    auto record = [&] {
        cl.begin();
        K.rms_norm(cl, {.w = view(wb),
                        .x = view(xb),
                        .x_off = 0,
                        .x_stride = n,
                        .y = view(y),
                        .y_off = 0,
                        .y_stride = n,
                        .n = n,
                        .nrows = 5,
                        .eps = 1e-6f});
        K.rms_norm(cl, {.w = view(wb),
                        .x = view(xb),
                        .x_off = 0,
                        .x_stride = n,
                        .y = view(y),
                        .y_off = 0,
                        .y_stride = n,
                        .n = n,
                        .nrows = 4,
                        .eps = 1e-6f});
        cl.mark("norms");
        cl.barrier();
        K.rms_norm(cl, {.w = view(wb),
                        .x = view(xb),
                        .x_off = 0,
                        .x_stride = n,
                        .y = view(y),
                        .y_off = 0,
                        .y_stride = n,
                        .n = n,
                        .nrows = 3,
                        .eps = 1e-6f});
        cl.end();
    };
    cl.set_tracing(false);
    record();
    EXPECT_TRUE(cl.trace().empty());
    cl.set_tracing(true);
    for (int pass = 0; pass < 2; ++pass) {
        record();
        ASSERT_EQ(cl.trace().size(), 2u) << pass;
        const std::string& a = cl.trace()[0];
        const std::string& b = cl.trace()[1];
        // rms_norm's push constants: n, rows, x offset and stride, y offset and stride, eps;
        // its views: weights, x, y.
        const std::string views = fmt::format(
            " views b{}+0:{} b{}+0:{} b{}+0:{}", dev.buffer_number(wb.handle()), n * 4,
            dev.buffer_number(xb.handle()), 5 * n * 4, dev.buffer_number(y.handle()), 5 * n * 4);
        const auto push = [&](uint32_t rows) {
            return fmt::format(" push 40 {:x} 0 40 0 40 358637bd", rows) + views;
        };
        EXPECT_EQ(a.rfind("norms: rms_norm[", 0), 0u) << a;
        EXPECT_NE(a.find("] 5x1x1" + push(5) + "; rms_norm["), std::string::npos) << a;
        EXPECT_TRUE(a.ends_with("] 4x1x1" + push(4))) << a;
        EXPECT_EQ(b.rfind("(after the last mark): rms_norm[", 0), 0u) << b;
        EXPECT_TRUE(b.ends_with("] 3x1x1" + push(3))) << b;
    }
    cl.set_tracing(false);
}

// The embedding lookup: each fetched row is the CPU's dequantization of the table row its id
// names (an id past the table reads the last row), nothing written past the fetched rows.
TEST(VulkanKernels, GetRowsMatchDequantizedRows) {
    VK_TEST_DEVICE();
    for (auto [t, rows, cols] : test::small_matrices()) {
        std::vector<float> wf = randn((size_t)rows * cols, rows * 7 + cols);
        const auto [wq, deq] = test::quantize_rows(t, wf, rows, cols);
        Buffer w = test::to_device(dev, wq);
        const std::vector<uint32_t> ids = {9, rows - 1, 0, 1, rows / 2, rows + 3};
        const uint32_t id_off = 1, n = (uint32_t)ids.size() - id_off, out_off = 2;
        Buffer idb = test::to_device(dev, ids);
        const size_t n_out = out_off + (size_t)n * cols + 4;
        Buffer out = test::poisoned(dev, n_out);
        test::run(dev, [&](CommandList& cl) {
            K.get_rows(cl, {.type = t,
                            .table = view(w),
                            .rows = rows,
                            .cols = cols,
                            .ids = view(idb),
                            .id_off = id_off,
                            .out = view(out),
                            .out_off = out_off,
                            .n = n});
        });
        auto got = test::from_device<float>(dev, out, n_out);
        for (uint32_t i = 0; i < out_off; ++i)
            ASSERT_EQ(test::bits(got[i]), test::kPoison) << qtype_name(t) << " wrote before";
        for (uint32_t r = 0; r < n; ++r) {
            const uint32_t id = std::min(ids[id_off + r], rows - 1);
            for (uint32_t c = 0; c < cols; ++c) {
                // The device may fuse a multiply and an add the CPU rounds apart.
                const float want = deq[(size_t)id * cols + c];
                ASSERT_NEAR(got[out_off + (size_t)r * cols + c], want, 1e-6f * std::fabs(want))
                    << qtype_name(t) << " " << cols << " cols, row " << r << " col " << c;
            }
        }
        for (size_t i = out_off + (size_t)n * cols; i < n_out; ++i)
            ASSERT_EQ(test::bits(got[i]), test::kPoison) << qtype_name(t) << " wrote past";
    }
}

// The SwiGLU, plain and also writing its values' F16 copy (before the down projection's GEMM
// tiles): the values against the reference, the halves what f16_copy makes of them, nothing
// written past either.
TEST(VulkanKernels, SwiGLU) {
    VK_TEST_DEVICE();
    const uint32_t n = 1000;
    std::vector<float> g = randn(n + 3, 8, 3.f), u = randn(n + 1, 9);
    Buffer gb = test::to_device(dev, g), ub = test::to_device(dev, u);
    for (bool f16 : {false, true}) {
        SCOPED_TRACE(f16 ? "with its F16 copy" : "plain");
        Buffer y = test::poisoned(dev, n + 2), h = test::poisoned(dev, n / 2 + 4);
        Buffer copy = test::poisoned(dev, n / 2);
        test::run(dev, [&](CommandList& cl) {
            K.swiglu(cl, view(gb), 3, view(ub), 1, view(y), 1, n, f16 ? view(h) : View{});
            cl.barrier();
            K.f16_copy(cl, view(y), 1, view(copy), n);
        });
        auto out = test::from_device<float>(dev, y, n + 2);
        EXPECT_EQ(test::bits(out[0]), test::kPoison);
        EXPECT_EQ(test::bits(out[n + 1]), test::kPoison);
        for (uint32_t i = 0; i < n; ++i) {
            double a = g[3 + i];
            double want = a / (1 + std::exp(-a)) * u[1 + i];
            ASSERT_NEAR(out[1 + i], want, 1e-5 * (std::fabs(want) + 1)) << i;
        }
        auto hs = test::from_device<uint16_t>(dev, h, n + 8);
        auto cs = test::from_device<uint16_t>(dev, copy, n);
        for (uint32_t i = 0; i < n && f16; ++i) ASSERT_EQ(hs[i], cs[i]) << "half " << i;
        for (uint32_t i = f16 ? n : 0; i < n + 8; ++i)
            ASSERT_EQ(hs[i], 0x7fc0 * (i % 2)) << "wrote where it should not";
    }
    Buffer h = test::poisoned(dev, 8);
    EXPECT_THROW(K.swiglu(*std::make_unique<CommandList>(dev), view(gb), 0, view(ub), 0, view(gb),
                          0, 7, view(h)),
                 Error);
}

TEST(VulkanKernels, ArgmaxFindsFirstMaximumAndSkipsNaN) {
    VK_TEST_DEVICE();
    const uint32_t n = 5003;
    std::vector<float> l = randn(n + 2, 11);
    l[2 + 4001] = 9.f;
    l[2 + 4500] = 9.f;  // a tie: the lower index wins
    l[2 + 17] = std::nanf("");
    l[0] = 100.f;  // outside the range (before l_off): must be ignored
    Buffer lb = test::to_device(dev, l);
    Buffer out = dev.create_buffer(16, MemoryKind::host);
    std::memset(out.mapped(), 0xff, 16);
    test::run(dev, [&](CommandList& cl) { K.argmax(cl, view(lb), 2, n, view(out), 1); });
    auto* o = static_cast<uint32_t*>(out.mapped());
    EXPECT_EQ(o[1], 4001u);
    EXPECT_EQ(o[0], 0xffffffffu);
    EXPECT_EQ(o[2], 0xffffffffu);
}

TEST(VulkanKernels, ArgmaxSmallAndAllNegative) {
    VK_TEST_DEVICE();
    std::vector<float> l = {-5.f, -3.f, -4.f};
    Buffer lb = test::to_device(dev, l);
    Buffer out = dev.create_buffer(4, MemoryKind::host);
    test::run(dev, [&](CommandList& cl) { K.argmax(cl, view(lb), 0, 3, view(out), 0); });
    EXPECT_EQ(static_cast<uint32_t*>(out.mapped())[0], 1u);
}

// The read probe of bench's decode floor reads every word once: each workgroup's XOR against the
// host's, for lengths of a whole number of workgroups, one word past it, and a part of one, read
// from a view that starts past the buffer's first words. The folds land at out_off in a poisoned
// buffer, and nothing is written past them.
TEST(VulkanKernels, StreamReadFoldsEveryWordOnce) {
    VK_TEST_DEVICE();
    ASSERT_EQ(K.stream_read_groups(16), 1u);
    const uint32_t per_group = [&] {
        uint32_t g = 1;  // 16-byte words a workgroup reads: the most that still take one
        while (K.stream_read_groups(uint64_t(g) * 2 * 16) == 1) g *= 2;
        return g;
    }();
    ASSERT_GE(per_group, 64u);
    for (uint64_t words :
         {uint64_t(per_group) * 3, uint64_t(per_group) * 3 + 1, uint64_t(per_group) / 2 + 3}) {
        std::mt19937 rng((uint32_t)words);
        const uint64_t lead = 64;  // words before the view
        std::vector<uint32_t> data((lead + words) * 4);
        for (auto& w : data) w = rng();
        Buffer src = test::to_device(dev, data);
        const uint32_t groups = K.stream_read_groups(words * 16);
        ASSERT_EQ(groups, (words + per_group - 1) / per_group);
        const uint32_t out_off = 5;
        Buffer out = dev.create_buffer((out_off + groups + 3) * 4, MemoryKind::host);
        std::memset(out.mapped(), 0xa5, (out_off + groups + 3) * 4);
        test::run(dev, [&](CommandList& cl) {
            K.stream_read(cl, view(src, lead * 16, words * 16), words * 16, view(out), out_off);
        });
        const auto* o = static_cast<const uint32_t*>(out.mapped());
        for (uint32_t g = 0; g < groups; ++g) {
            uint32_t want = 0;
            for (uint64_t w = uint64_t(g) * per_group;
                 w < std::min(words, uint64_t(g + 1) * per_group); ++w)
                for (int i = 0; i < 4; ++i) want ^= data[(lead + w) * 4 + i];
            EXPECT_EQ(o[out_off + g], want) << "words " << words << ", group " << g;
        }
        for (uint32_t i = 0; i < out_off; ++i) EXPECT_EQ(o[i], 0xa5a5a5a5u);
        for (uint32_t i = out_off + groups; i < out_off + groups + 3; ++i)
            EXPECT_EQ(o[i], 0xa5a5a5a5u);
    }
}

// Every variant the device supports, against a double-precision reference of the same F16 data.
TEST(VulkanKernels, MatmulF16AllSupportedVariants) {
    VK_TEST_DEVICE();
    const Features& f = dev.features();
    if (!f.storage_16bit || !f.float16) GTEST_SKIP() << "no 16-bit storage/arithmetic";
    int ran = 0;
    for (Variant v :
         {Variant::scalar, Variant::nv_coopmat, Variant::khr_coopmat, Variant::nv_coopmat2}) {
        if (!f.supports(v)) continue;
        for (auto [m, n, k] : {std::tuple{32u, 48u, 64u}, std::tuple{16u, 16u, 16u},
                               std::tuple{7u, 19u, 33u}, std::tuple{7u, 19u, 40u}}) {
            std::vector<float> af = randn((size_t)m * k, m + n), wf = randn((size_t)n * k, k);
            std::vector<uint16_t> ah(af.size()), wh(wf.size());
            for (size_t i = 0; i < af.size(); ++i) ah[i] = f32_to_f16(af[i]);
            for (size_t i = 0; i < wf.size(); ++i) wh[i] = f32_to_f16(wf[i]);
            Buffer ab = test::to_device(dev, ah, 64), wb = test::to_device(dev, wh, 64);
            Buffer c = test::poisoned(dev, (size_t)m * n + 4);
            bool recorded = false;
            test::run(dev, [&](CommandList& cl) {
                recorded = K.matmul_f16(cl, v, view(ab), view(wb), view(c), m, n, k);
            });
            if (!recorded) {
                EXPECT_NE(v, Variant::scalar);
                EXPECT_TRUE(m % 16 || n % 16 || k % 16)
                    << variant_name(v) << " refused whole tiles";
                continue;
            }
            ++ran;
            auto out = test::from_device<float>(dev, c, (size_t)m * n + 4);
            for (uint32_t i = 0; i < m; ++i)
                for (uint32_t j = 0; j < n; ++j) {
                    double s = 0;
                    for (uint32_t kk = 0; kk < k; ++kk)
                        s += (double)f16_to_f32(ah[i * k + kk]) * f16_to_f32(wh[j * k + kk]);
                    ASSERT_NEAR(out[i * n + j], s, 1e-3 * (std::sqrt((double)k) + std::fabs(s)))
                        << variant_name(v) << " " << m << "x" << n << "x" << k << " at " << i << ","
                        << j;
                }
            for (int e = 0; e < 4; ++e)
                EXPECT_EQ(test::bits(out[(size_t)m * n + e]), test::kPoison);
        }
    }
    EXPECT_GT(ran, 0);
}

}  // namespace
}  // namespace dl::vk
