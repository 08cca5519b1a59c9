// The window attention (Kernels::attention_rows: prep, then the tiled flash attention over the F16
// KV cache) against a plain double-precision causal softmax, at the boundaries of its tiles: one
// row, one row past a query tile, several query tiles, windows starting after earlier windows'
// cache rows (at positions that are not a key tile multiple), head sizes 64 to 256 and odd
// multiples, grouped-query ratios 1 to 8, with and without the sigmoid gate.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "attn_window.h"
#include "core/half.h"
#include "vk_test.h"

namespace dl::vk {
namespace {

using test::Path;
using test::path_variant;
using test::Window;
using test::WindowCase;

// The query rows a workgroup of path's kernel takes for case c (shuffles: the tiles' scores over
// subgroup lanes), or nullopt where the device has no such kernel for its heads.
std::optional<uint32_t> rows_a_group(const Features& f, Path path, const WindowCase& c,
                                     bool shuffles) {
    const Variant v = path_variant(path);
    if (path == Path::cm2) {
        auto t = Kernels::attention_cm2(f, v, c.head_dim, c.n_head, c.n_kv);
        return t ? std::optional<uint32_t>(t->rows) : std::nullopt;
    }
    if (path == Path::khr) {
        auto t = Kernels::attention_khr(f, v, c.head_dim, c.n_head, c.n_kv);
        return t ? std::optional<uint32_t>(t->rows) : std::nullopt;
    }
    return Kernels::attention_tiles(f, c.head_dim, c.n_head, c.n_kv, shuffles).rows;
}

// Every row and head of the window's output against its reference, and the gap after each
// output row untouched.
void check_window(const Window& w, const std::vector<float>& out, bool tensor_cores) {
    for (uint32_t r = 0; r < w.n; ++r) {
        for (uint32_t h = 0; h < w.c.n_head; ++h) {
            w.check(out, r, h, tensor_cores);
            if (::testing::Test::HasFatalFailure()) return;
        }
        for (uint32_t i = w.c.n_head * w.c.head_dim; i < w.o_row; ++i)
            ASSERT_EQ(test::bits(out[w.o_off + r * w.o_row + i]), test::kPoison)
                << "gap after row " << r << " written";
    }
}

// The window of case c on path's kernel against the double-precision reference.
void check_path(const WindowCase& c, Path path) {
    VK_TEST_DEVICE();
    const bool shuffles = path == Path::shuffle;
    test::Scoped shuffle_scope(K.tuning.attention_shuffles, shuffles);
    const Variant v = path_variant(path);
    const std::optional<uint32_t> rows = rows_a_group(dev.features(), path, c, shuffles);
    if (!rows)
        GTEST_SKIP() << "no "
                     << (path == Path::cm2 ? "NV cooperative matrix 2" : "KHR cooperative-matrix")
                     << " attention for this head size here (the device lacks the matrices, a "
                        "shape dividing the heads or the shared memory)";
    const uint32_t n = c.row_tiles * *rows + c.extra_rows;
    ASSERT_GE(n, 1u);
    Window w(dev, c, n);
    test::run(dev, [&](CommandList& cl) { w.record(K, cl, v); });
    check_window(w, test::from_device<float>(dev, w.act, w.n_act),
                 path == Path::cm2 || path == Path::khr);
}

const auto kWindowCases =
    ::testing::Values(WindowCase{64, 4, 4, 0, 0, 1, false},      // one row, no history
                      WindowCase{64, 8, 1, 37, 1, 1, true},      // one past a query tile
                      WindowCase{64, 6, 3, 5, 3, 2, false},      // several query tiles
                      WindowCase{128, 4, 2, 0, 1, 1, true},      //
                      WindowCase{128, 8, 2, 53, 4, 3, false},    // GQA 4 after earlier windows
                      WindowCase{128, 8, 1, 19, 0, 1, true},     // GQA 8, one row
                      WindowCase{256, 16, 4, 45, 2, 3, true},    // qwen35 9B heads
                      WindowCase{256, 8, 1, 100, 1, 1, true},    // GQA 8
                      WindowCase{256, 2, 2, 19, 5, 2, false},    //
                      WindowCase{96, 6, 2, 7, 2, 1, true},       // an odd multiple of 32
                      WindowCase{96, 6, 2, 203, 1, 2, false},    // ...after a longer history
                      WindowCase{256, 4, 1, 300, 0, 1, false});  // one row, many key tiles

class WindowAttention : public ::testing::TestWithParam<std::tuple<WindowCase, Path>> {};

TEST_P(WindowAttention, MatchesDoubleReference) {
    const auto [c, path] = GetParam();
    check_path(c, path);
}

INSTANTIATE_TEST_SUITE_P(Shapes, WindowAttention,
                         ::testing::Combine(kWindowCases,
                                            ::testing::Values(Path::plain, Path::shuffle, Path::cm2,
                                                              Path::khr)),
                         [](const auto& info) {
                             const WindowCase& c = std::get<0>(info.param);
                             const Path path = std::get<1>(info.param);
                             return fmt::format("d{}h{}kv{}at{}_{}tiles_plus{}{}{}", c.head_dim,
                                                c.n_head, c.n_kv, c.start, c.row_tiles,
                                                c.extra_rows, c.gate ? "_gated" : "",
                                                path == Path::plain     ? "_plain"
                                                : path == Path::shuffle ? "_shuffle"
                                                : path == Path::cm2     ? "_cm2"
                                                                        : "_khr");
                         });

// The NV tensor-core kernel in its other form, every key tile clamped and masked
// (Tuning::attention_cm2_unclamped off; the cases above run it unclamped): the same cases.
class WindowAttentionClamped : public ::testing::TestWithParam<WindowCase> {};

TEST_P(WindowAttentionClamped, MatchesDoubleReference) {
    VK_TEST_DEVICE();
    test::Scoped clamped_scope(K.tuning.attention_cm2_unclamped, false);
    check_path(GetParam(), Path::cm2);
}

INSTANTIATE_TEST_SUITE_P(Shapes, WindowAttentionClamped, kWindowCases, [](const auto& info) {
    const WindowCase& c = info.param;
    return fmt::format("d{}h{}kv{}at{}_{}tiles_plus{}{}", c.head_dim, c.n_head, c.n_kv, c.start,
                       c.row_tiles, c.extra_rows, c.gate ? "_gated" : "");
});

// The window attention split over its keys (Kernels::attention_rows_split, forced to 2, 3 and 5
// parts) against the same double-precision reference: a window with no history (every part but
// the last finds no keys), histories shorter than the parts and not a multiple of the key tile,
// one row over many tiles, several query tiles over a long history. The scratch's sums start as
// NaN, so a part that reads what no part wrote shows; every counter is back at zero after.
class WindowAttentionSplit : public ::testing::TestWithParam<std::tuple<WindowCase, Path, int>> {};

TEST_P(WindowAttentionSplit, MatchesDoubleReference) {
    VK_TEST_DEVICE();
    const auto [c, path, parts] = GetParam();
    const bool shuffles = path == Path::shuffle;
    test::Scoped shuffle_scope(K.tuning.attention_shuffles, shuffles);
    test::Scoped parts_scope(K.tuning.attention_rows_parts, parts);
    const Variant v = path_variant(path);
    const std::optional<uint32_t> rows = rows_a_group(dev.features(), path, c, shuffles);
    if (!rows) GTEST_SKIP() << "no KHR cooperative-matrix attention for this head size here";
    const uint32_t n = c.row_tiles * *rows + c.extra_rows;
    Window w(dev, c, n);
    const Kernels::AttentionSplit s =
        Kernels::attention_rows_split(dev.features(), K.tuning, w.args.a, n, v, 0);
    ASSERT_EQ(s.parts, (uint32_t)parts);
    Buffer counters = dev.create_buffer(s.need.counters, MemoryKind::device);
    dev.fill(counters, 0, s.need.counters, 0);
    Buffer sums = test::to_device(dev, std::vector<uint32_t>(s.need.parts / 4, test::kPoison));
    test::run(dev, [&](CommandList& cl) { w.record(K, cl, v, {view(counters), view(sums)}); });
    check_window(w, test::from_device<float>(dev, w.act, w.n_act), path == Path::khr);
    if (HasFatalFailure()) return;
    for (uint32_t x : test::from_device<uint32_t>(dev, counters, s.need.counters / 4))
        ASSERT_EQ(x, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, WindowAttentionSplit,
    ::testing::Combine(
        ::testing::Values(WindowCase{128, 8, 2, 0, 2, 3, true},      // no history
                          WindowCase{64, 8, 1, 37, 1, 1, true},      // a history of few tiles
                          WindowCase{96, 6, 2, 203, 1, 2, false},    // not a multiple of a tile
                          WindowCase{256, 4, 1, 300, 0, 1, false},   // one row, many key tiles
                          WindowCase{256, 16, 4, 999, 2, 5, true}),  // qwen35 9B heads, later
        ::testing::Values(Path::plain, Path::shuffle, Path::khr), ::testing::Values(2, 3, 5)),
    [](const auto& info) {
        const WindowCase& c = std::get<0>(info.param);
        const Path path = std::get<1>(info.param);
        return fmt::format("d{}h{}kv{}at{}_{}tiles_plus{}{}_{}_{}parts", c.head_dim, c.n_head,
                           c.n_kv, c.start, c.row_tiles, c.extra_rows, c.gate ? "_gated" : "",
                           path == Path::plain     ? "plain"
                           : path == Path::shuffle ? "shuffle"
                                                   : "khr",
                           std::get<2>(info.param));
    });

// The launcher's rule on devices described by their features: a short window late in a long
// context of the 9B's heads splits into parts that fill twice the multiprocessors; a long
// window, a short context (parts of fewer than four tiles) or the NV kernel does not split.
TEST(WindowAttentionSplitRule, SplitsShortWindowsOfLongContexts) {
    VK_TEST_DEVICE();
    Features f = dev.features();
    f.sm_count = 132;
    f.max_shared_memory = std::max(f.max_shared_memory, 49152u);
    Tuning t;
    Kernels::Attention a{16,
                         4,
                         256,
                         64,
                         8192,
                         0,
                         512,
                         0,
                         0,
                         0,
                         0,
                         Kernels::kNone,
                         0,
                         Kernels::kNone,
                         Kernels::kNone,
                         0,
                         1e-6f};
    const auto tiles = Kernels::attention_tiles(f, 256, 16, 4);
    const uint32_t blocks76 = 16 / tiles.heads * ((76 + tiles.rows - 1) / tiles.rows);
    const auto s76 = Kernels::attention_rows_split(f, t, a, 76, Variant::scalar, 0);
    if (blocks76 < 132) {
        EXPECT_GE(s76.parts, 2u);
        EXPECT_LE(s76.parts, Kernels::kWindowParts);
        EXPECT_LE(blocks76 * s76.parts, 2u * 132);
        EXPECT_EQ(s76.need.counters, blocks76 * 4ull);
        EXPECT_EQ(s76.need.parts, 4ull * blocks76 * s76.parts * tiles.query_vectors * (256 + 2));
    }
    EXPECT_EQ(Kernels::attention_rows_split(f, t, a, 4096, Variant::scalar, 0).parts, 1u);
    Kernels::Attention short_ctx = a;
    short_ctx.n_ctx = 4 * tiles.keys;  // one part of four tiles at most
    EXPECT_EQ(Kernels::attention_rows_split(f, t, short_ctx, 1, Variant::scalar, 0).parts, 1u);
    t.attention_rows_parts = 0;
    EXPECT_EQ(Kernels::attention_rows_split(f, t, a, 1, Variant::scalar, 0).parts, 1u);
    t.attention_rows_parts = 40;  // (capped)
    EXPECT_EQ(Kernels::attention_rows_split(f, t, a, 1, Variant::scalar, 0).parts,
              Kernels::kWindowParts);
}

// Every tile shape chosen fits the device and covers whole groups of query heads.
TEST(WindowAttentionTiles, FitTheDevice) {
    VK_TEST_DEVICE();
    const Features& f = dev.features();
    for (bool shuffles : {false, true})
        for (uint32_t hd : {2u, 32u, 64u, 80u, 96u, 128u, 200u, 256u})
            for (uint32_t grp : {1u, 2u, 3u, 4u, 8u}) {
                auto t = Kernels::attention_tiles(f, hd, 2 * grp, 2, shuffles);
                EXPECT_LE(t.shared_bytes, f.max_shared_memory) << hd;
                EXPECT_LE(t.threads, f.max_workgroup_invocations) << hd;
                EXPECT_EQ(grp % t.heads, 0u) << hd << " " << grp;
                EXPECT_EQ(t.rows * t.heads, t.query_vectors);
                EXPECT_EQ(t.keys % t.keys_per_thread, 0u);
                if (!shuffles || !f.subgroup_shuffle) {
                    EXPECT_EQ(t.shuffle_lanes, 0u);
                }
                if (t.shuffle_lanes) {
                    EXPECT_LE(t.shuffle_lanes, std::max(f.min_subgroup_size, 1u)) << hd;
                    EXPECT_EQ(t.shuffle_lanes * t.query_vectors, t.threads) << hd;
                    EXPECT_EQ(t.keys_per_thread * t.shuffle_lanes, t.keys) << hd;
                }
            }
    // The 9B head size takes the shuffle module wherever subgroups of 8 shuffle.
    if (f.subgroup_shuffle && f.min_subgroup_size >= 8) {
        EXPECT_EQ(Kernels::attention_tiles(f, 256, 16, 4).shuffle_lanes, 8u);
    }
    Features tiny = f;
    tiny.max_shared_memory = 1024;
    EXPECT_THROW(Kernels::attention_tiles(tiny, 256, 16, 4), Error);
}

// The KHR cooperative-matrix tile on devices described by their features (no such device is
// needed): every tile chosen fits the shared memory, takes whole matrix blocks and whole groups
// of query heads, and holds every output block for the fewest subgroups the workgroup can have;
// the head sizes of the models get one on devices of 48 and 64 KiB, and what cannot run is
// declined.
TEST(WindowAttentionTiles, KhrFitsTheDevice) {
    if (!variant_built(Variant::khr_coopmat))
        GTEST_SKIP() << "this build has no KHR cooperative-matrix modules";
    Features base;
    base.storage_16bit = base.float16 = base.memory_model = base.khr_coopmat = true;
    base.max_workgroup_invocations = 1024;
    base.khr_f16_shapes = {{16, 16, 16}};
    const Variant v = Variant::khr_coopmat;
    struct Subgroups {
        uint32_t min, max;
    };
    for (const std::vector<CoopmatShape>& shapes :
         {std::vector<CoopmatShape>{{16, 16, 16}},
          std::vector<CoopmatShape>{{16, 8, 16}, {16, 16, 16}},
          std::vector<CoopmatShape>{{16, 16, 16}, {8, 16, 16}}})
        for (uint32_t shared : {32u * 1024, 48u * 1024, 64u * 1024})
            for (Subgroups sg : {Subgroups{32, 32}, Subgroups{32, 64}, Subgroups{8, 32},
                                 Subgroups{16, 16}, Subgroups{64, 64}})
                for (uint32_t hd : {64u, 96u, 128u, 256u})
                    for (uint32_t grp : {1u, 2u, 3u, 4u, 8u}) {
                        Features f = base;
                        f.khr_f16_shapes = shapes;
                        f.max_shared_memory = shared;
                        f.min_subgroup_size = sg.min;
                        f.max_subgroup_size = f.subgroup_size = sg.max;
                        const auto t = Kernels::attention_khr(f, v, hd, 2 * grp, 2);
                        const std::string what =
                            fmt::format("head {} group {} shared {} subgroups {}..{}", hd, grp,
                                        shared, sg.min, sg.max);
                        if (shared >= 48 * 1024 && hd % 64 == 0) {
                            ASSERT_TRUE(t.has_value()) << what;
                        }
                        if (!t) continue;
                        EXPECT_LE(t->shared_bytes, f.max_shared_memory) << what;
                        EXPECT_LE(t->threads, f.max_workgroup_invocations) << what;
                        EXPECT_EQ(t->threads % sg.max, 0u) << what;
                        EXPECT_EQ(t->threads % t->query_vectors, 0u) << what;
                        EXPECT_EQ(t->query_vectors % t->shape.m, 0u) << what;
                        EXPECT_EQ(t->keys % t->shape.n, 0u) << what;
                        EXPECT_EQ(t->keys % t->shape.k, 0u) << what;
                        EXPECT_EQ(hd % t->shape.n, 0u) << what;
                        EXPECT_EQ(hd % t->shape.k, 0u) << what;
                        EXPECT_EQ(t->shape.n % 8, 0u) << what;
                        EXPECT_EQ(t->shape.k % 8, 0u) << what;
                        EXPECT_EQ(hd % t->out_cols, 0u) << what;
                        EXPECT_EQ(t->out_cols % t->shape.n, 0u) << what;
                        const uint32_t blocks = t->query_vectors / t->shape.m * (hd / t->shape.n);
                        EXPECT_GE(t->blocks * (t->threads / sg.max), blocks) << what;
                        EXPECT_EQ(grp % t->heads, 0u) << what;
                        EXPECT_EQ(t->rows * t->heads, t->query_vectors) << what;
                    }
    // Declines: another variant, no KHR cooperative matrices, a head size no shape divides, no
    // room for the smallest tile.
    Features f = base;
    f.max_shared_memory = 48 * 1024;
    f.min_subgroup_size = f.max_subgroup_size = f.subgroup_size = 32;
    EXPECT_TRUE(Kernels::attention_khr(f, v, 128, 8, 2).has_value());
    EXPECT_FALSE(Kernels::attention_khr(f, Variant::scalar, 128, 8, 2).has_value());
    EXPECT_FALSE(Kernels::attention_khr(f, Variant::nv_coopmat2, 128, 8, 2).has_value());
    EXPECT_FALSE(Kernels::attention_khr(f, v, 72, 8, 2).has_value());
    Features none = f;
    none.khr_coopmat = false;
    EXPECT_FALSE(Kernels::attention_khr(none, v, 128, 8, 2).has_value());
    Features tiny = f;
    tiny.max_shared_memory = 4 * 1024;
    EXPECT_FALSE(Kernels::attention_khr(tiny, v, 128, 8, 2).has_value());
}

// Which kernel a window's attention gets on a device with both NV cooperative matrix 2 and KHR
// cooperative matrices: the KHR one for heads over 128, NV2 otherwise; a device without KHR
// matrices, or planned for another variant, keeps its variant.
TEST(WindowAttentionTiles, VariantByHeadSize) {
    if (!variant_built(Variant::khr_coopmat) || !variant_built(Variant::nv_coopmat2))
        GTEST_SKIP() << "this build lacks the cooperative-matrix modules";
    Features f;
    f.storage_16bit = f.float16 = f.memory_model = f.khr_coopmat = f.nv_coopmat2 = true;
    f.khr_f16_shapes = {{16, 16, 16}};
    ASSERT_TRUE(f.supports(Variant::nv_coopmat2));
    EXPECT_EQ(Kernels::attention_variant(f, Variant::nv_coopmat2, 256), Variant::khr_coopmat);
    EXPECT_EQ(Kernels::attention_variant(f, Variant::nv_coopmat2, 128), Variant::nv_coopmat2);
    EXPECT_EQ(Kernels::attention_variant(f, Variant::nv_coopmat2, 64), Variant::nv_coopmat2);
    EXPECT_EQ(Kernels::attention_variant(f, Variant::scalar, 256), Variant::scalar);
    EXPECT_EQ(Kernels::attention_variant(f, Variant::khr_coopmat, 256), Variant::khr_coopmat);
    f.khr_f16_shapes.clear();  // no usable KHR shape: the NV2 kernel stays
    EXPECT_EQ(Kernels::attention_variant(f, Variant::nv_coopmat2, 256), Variant::nv_coopmat2);
}

}  // namespace
}  // namespace dl::vk
