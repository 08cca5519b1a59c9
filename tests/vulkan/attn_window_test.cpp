// The window attention (Kernels::attention_rows: prep, then the tiled flash attention over the F16
// KV cache) against a plain double-precision causal softmax, at the boundaries of its tiles: one
// row, one row past a query tile, several query tiles, windows starting after earlier windows'
// cache rows (at positions that are not a key tile multiple), head sizes 64 to 256 and odd
// multiples, grouped-query ratios 1 to 8, with and without the sigmoid gate.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/half.h"
#include "vk_test.h"

namespace dl::vk {
namespace {

struct WindowCase {
    uint32_t head_dim, n_head, n_kv;
    uint32_t start;                  // tok[0]: cache rows [0, start) come from earlier windows
    uint32_t row_tiles, extra_rows;  // rows = row_tiles · (query rows a workgroup) + extra_rows
    bool gate;
};

// One window's buffers: act holds the q projection (with the gate after each head's q when
// gated), k, v, then room for the prepared queries and the output, whose rows are spaced by a gap
// that must stay untouched; the KV cache holds `start` rows of earlier windows and poison (NaN)
// after them. Kh/Vh are the host F16 cache as the window leaves it.
struct Window {
    WindowCase c;
    uint32_t n, n_ctx, hd, q_stride, q_row, kv_row, o_row, q_off, k_off, v_off, qo_off, o_off,
        n_act;
    size_t row_halves;
    std::vector<float> in;
    std::vector<uint16_t> Kh, Vh;
    Buffer act, kc, vc, params, tok;
    Kernels::AttentionRows args{};

    Window(Device& dev, const WindowCase& wc, uint32_t rows) : c(wc), n(rows) {
        hd = c.head_dim;
        n_ctx = c.start + n + 5;  // rows past the window stay poisoned
        q_stride = c.gate ? 2 * hd : hd;
        q_row = c.n_head * q_stride;
        kv_row = c.n_kv * hd;
        o_row = c.n_head * hd + 6;
        q_off = 0;
        k_off = q_off + n * q_row;
        v_off = k_off + n * kv_row;
        qo_off = v_off + n * kv_row;
        o_off = qo_off + n * c.n_head * hd;
        n_act = o_off + n * o_row;
        std::mt19937 rng(hd * 131 + c.n_head * 17 + c.n_kv * 7 + c.start + n);
        // Queries three times larger than the keys make the softmax peaked, so a wrong running
        // max or a missed key shows.
        in = test::randn(n_act, rng, 3.f);
        for (uint32_t i = qo_off; i < n_act; ++i) std::memcpy(&in[i], &test::kPoison, 4);
        act = test::to_device(dev, in);

        row_halves = (size_t)c.n_kv * hd;
        const size_t cache_words = n_ctx * row_halves / 2;
        Kh.resize(n_ctx * row_halves);
        Vh.resize(Kh.size());
        std::normal_distribution<float> nd(0.f, 1.f);
        for (size_t i = 0; i < c.start * row_halves; ++i) {
            Kh[i] = f32_to_f16(nd(rng));
            Vh[i] = f32_to_f16(nd(rng));
        }
        std::vector<uint32_t> kw(cache_words, test::kPoison), vw(cache_words, test::kPoison);
        std::memcpy(kw.data(), Kh.data(), c.start * row_halves * 2);
        std::memcpy(vw.data(), Vh.data(), c.start * row_halves * 2);
        kc = test::to_device(dev, kw);
        vc = test::to_device(dev, vw);
        // The window's rows as the prep stores them (no norms, no rope: q passes through).
        for (uint32_t r = 0; r < n; ++r)
            for (uint32_t i = 0; i < kv_row; ++i) {
                Kh[(c.start + r) * row_halves + i] = f32_to_f16(in[k_off + r * kv_row + i]);
                Vh[(c.start + r) * row_halves + i] = f32_to_f16(in[v_off + r * kv_row + i]);
            }

        params = dev.create_buffer(16, MemoryKind::device);
        tok = dev.create_buffer(16, MemoryKind::host);
        static_cast<uint32_t*>(tok.mapped())[0] = c.start;
        args.a = Kernels::Attention{c.n_head, c.n_kv,         hd,
                                    0,        n_ctx,          q_off,
                                    q_stride, k_off,          v_off,
                                    qo_off,   o_off,          c.gate ? q_off + hd : Kernels::kNone,
                                    q_stride, Kernels::kNone, Kernels::kNone,
                                    0,        1e-6f};
        args.q_row = q_row;
        args.kv_row = kv_row;
        args.o_row = o_row;
        args.gate_row = q_row;
    }

    void record(Kernels& K, CommandList& cl, Variant v = Variant::scalar) {
        K.attention_rows(cl, args, view(act), view(params), view(kc), view(vc), view(tok), n, v);
    }

    // Row r, head h in double precision: softmax(q · K / sqrt(head_dim)) · V over cache rows
    // 0 .. start + r, times sigmoid(gate) when gated. half_q: q / sqrt(head_dim) rounded to F16
    // first, as the cooperative-matrix kernels feed it to their products.
    std::vector<double> reference(uint32_t r, uint32_t h, bool half_q = false) const {
        const uint32_t pos = c.start + r;
        const float* q = &in[q_off + r * q_row + h * q_stride];
        const size_t kv = (size_t)(h / (c.n_head / c.n_kv)) * hd;
        const double scale = 1.0 / std::sqrt((double)hd);
        std::vector<double> qs(hd), s(pos + 1), o(hd, 0.0);
        for (uint32_t d = 0; d < hd; ++d)
            qs[d] = half_q ? f16_to_f32(f32_to_f16(q[d] * (float)scale)) : q[d] * scale;
        double mx = -INFINITY;
        for (uint32_t j = 0; j <= pos; ++j) {
            double dot = 0;
            for (uint32_t d = 0; d < hd; ++d)
                dot += qs[d] * f16_to_f32(Kh[j * row_halves + kv + d]);
            s[j] = dot;
            mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (uint32_t j = 0; j <= pos; ++j)
            for (uint32_t d = 0; d < hd; ++d)
                o[d] += s[j] / sum * f16_to_f32(Vh[j * row_halves + kv + d]);
        if (c.gate)
            for (uint32_t d = 0; d < hd; ++d) o[d] /= 1.0 + std::exp(-(double)q[hd + d]);
        return o;
    }

    // Row r, head h of the device's output against reference(): every element finite and close.
    // The cooperative-matrix kernels (tensor_cores: NV cooperative matrix 2 or KHR) multiply F16
    // queries and F16 softmax weights: their reference rounds the queries the same way, and the
    // weights' rounding (2^-11 relative) stays within 1e-3 of the output's scale.
    void check(const std::vector<float>& out, uint32_t r, uint32_t h,
               bool tensor_cores = false) const {
        const std::vector<double> want = reference(r, h, tensor_cores);
        const double tol = tensor_cores ? 1e-3 : 1e-4;
        for (uint32_t d = 0; d < hd; ++d) {
            const float got = out[o_off + r * o_row + h * hd + d];
            ASSERT_TRUE(std::isfinite(got)) << "row " << r << " head " << h << " dim " << d;
            ASSERT_NEAR(got, want[d], tol * (1 + std::fabs(want[d])))
                << "row " << r << " head " << h << " dim " << d;
        }
    }
};

// Scores from queries in shared memory, summed over subgroup lanes (where the device can), or
// both products on NV cooperative matrix 2 or on KHR cooperative matrices (where the device has
// them).
enum class Path { plain, shuffle, cm2, khr };

// The variant attention_rows() is called with on each path.
Variant path_variant(Path path) {
    return path == Path::cm2   ? Variant::nv_coopmat2
           : path == Path::khr ? Variant::khr_coopmat
                               : Variant::scalar;
}

class WindowAttention : public ::testing::TestWithParam<std::tuple<WindowCase, Path>> {};

TEST_P(WindowAttention, MatchesDoubleReference) {
    VK_TEST_DEVICE();
    const auto [c, path] = GetParam();
    const bool shuffles = path == Path::shuffle;
    test::Scoped shuffle_scope(K.tuning.attention_shuffles, shuffles);
    uint32_t rows_a_group = 0;
    const Variant v = path_variant(path);
    if (path == Path::cm2) {
        auto t = Kernels::attention_cm2(dev.features(), v, c.head_dim, c.n_head, c.n_kv);
        if (!t) GTEST_SKIP() << "no NV cooperative matrix 2 attention for this head size here";
        rows_a_group = t->rows;
    } else if (path == Path::khr) {
        auto t = Kernels::attention_khr(dev.features(), v, c.head_dim, c.n_head, c.n_kv);
        if (!t)
            GTEST_SKIP() << "no KHR cooperative-matrix attention for this head size here (the "
                            "device lacks KHR cooperative matrices, an F16 shape dividing it or "
                            "the shared memory)";
        rows_a_group = t->rows;
    } else {
        rows_a_group =
            Kernels::attention_tiles(dev.features(), c.head_dim, c.n_head, c.n_kv, shuffles).rows;
    }
    const uint32_t n = c.row_tiles * rows_a_group + c.extra_rows;
    ASSERT_GE(n, 1u);
    Window w(dev, c, n);
    test::run(dev, [&](CommandList& cl) { w.record(K, cl, v); });
    auto out = test::from_device<float>(dev, w.act, w.n_act);
    for (uint32_t r = 0; r < n; ++r) {
        for (uint32_t h = 0; h < c.n_head; ++h) {
            w.check(out, r, h, path == Path::cm2 || path == Path::khr);
            if (HasFatalFailure()) return;
        }
        for (uint32_t i = c.n_head * c.head_dim; i < w.o_row; ++i)
            ASSERT_EQ(test::bits(out[w.o_off + r * w.o_row + i]), test::kPoison)
                << "gap after row " << r << " written";
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, WindowAttention,
    ::testing::Combine(
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
                          WindowCase{256, 4, 1, 300, 0, 1, false}),  // one row, many key tiles
        ::testing::Values(Path::plain, Path::shuffle, Path::cm2, Path::khr)),
    [](const auto& info) {
        const WindowCase& c = std::get<0>(info.param);
        const Path path = std::get<1>(info.param);
        return fmt::format("d{}h{}kv{}at{}_{}tiles_plus{}{}{}", c.head_dim, c.n_head, c.n_kv,
                           c.start, c.row_tiles, c.extra_rows, c.gate ? "_gated" : "",
                           path == Path::plain     ? "_plain"
                           : path == Path::shuffle ? "_shuffle"
                           : path == Path::cm2     ? "_cm2"
                                                   : "_khr");
    });

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

// Speed report (DELTALLM_VK_SPEED=1; meant for a real GPU): the attention of Qwen3.5-9B (16 query
// heads over 4 key/value heads of 256, gated) and of Qwen3-8B (32 over 8 of 128) for a window of
// 512 rows at the start of a prompt and as the last window of 4096- and 8192-token prompts, on
// every path the device has (tiles with and without shuffled scores, the NV tensor-core kernel at
// a few tile sizes, the KHR cooperative-matrix kernel), with the cache bytes the tiles read against
// reading the whole history once per query row and head. A few rows are still checked.
TEST(WindowAttentionSpeed, Report) {
    VK_SPEED_DEVICE();
    const Features& f = dev.features();
    const bool cpu = f.cpu;
    const uint32_t n = cpu ? 32 : 512;
    struct Model {
        const char* name;
        uint32_t n_head, n_kv, hd;
        bool gate;
    };
    struct Config {
        Path path;
        Kernels::AttentionCm2 tile;  // cm2 only; zero: the launcher's choice
    };
    std::vector<Config> configs = {
        {Path::shuffle, {}}, {Path::plain, {}}, {Path::cm2, {}}, {Path::khr, {}}};
    if (!cpu)
        for (uint32_t qv : {64u, 128u})
            for (uint32_t keys : {32u, 64u}) configs.push_back({Path::cm2, {qv, keys, 0, 0}});
    for (const Model& m :
         {Model{"qwen35 9B", 16, 4, 256, true}, Model{"qwen3 8B", 32, 8, 128, false}})
        for (const Config& cf : configs) {
            const bool shuffles = cf.path == Path::shuffle;
            const Variant v = path_variant(cf.path);
            uint32_t rows = 0, heads = 0;
            std::string what;
            if (cf.path == Path::cm2) {
                auto t = Kernels::attention_cm2(f, v, m.hd, m.n_head, m.n_kv);
                if (!t) continue;
                if (cf.tile.query_vectors) {
                    t->query_vectors = cf.tile.query_vectors;
                    t->keys = cf.tile.keys;
                    t->rows = t->query_vectors / t->heads;
                }
                rows = t->rows;
                heads = t->heads;
                what = fmt::format("tensor cores, {} rows x {} heads, {} keys a tile{}", t->rows,
                                   t->heads, t->keys, cf.tile.query_vectors ? "" : " (launcher)");
            } else if (cf.path == Path::khr) {
                const auto t = Kernels::attention_khr(f, v, m.hd, m.n_head, m.n_kv);
                if (!t) continue;
                rows = t->rows;
                heads = t->heads;
                what = fmt::format(
                    "KHR cooperative matrices {}x{}x{}, {} rows x {} heads, {} keys a tile, {} "
                    "threads, {} bytes, {} output blocks a subgroup at most",
                    t->shape.m, t->shape.n, t->shape.k, t->rows, t->heads, t->keys, t->threads,
                    t->shared_bytes, t->blocks);
            } else {
                const auto t = Kernels::attention_tiles(f, m.hd, m.n_head, m.n_kv, shuffles);
                if (shuffles && !t.shuffle_lanes) continue;
                rows = t.rows;
                heads = t.heads;
                what = fmt::format(
                    "tiles {} rows x {} heads, {} keys a tile, {} threads, {} bytes, {}", t.rows,
                    t.heads, t.keys, t.threads, t.shared_bytes,
                    t.shuffle_lanes ? fmt::format("scores over {} lanes", t.shuffle_lanes)
                                    : std::string("plain scores"));
            }
            test::Scoped shuffle_scope(K.tuning.attention_shuffles, shuffles);
            test::Scoped tile_scope(K.tuning.attention_cm2_tile, cf.tile);
            fmt::print("window attention {}: {}\n", m.name, what);
            for (uint32_t start :
                 cpu ? std::vector<uint32_t>{0, 224} : std::vector<uint32_t>{0, 3584, 7680}) {
                Window w(dev, WindowCase{m.hd, m.n_head, m.n_kv, start, 0, 0, m.gate}, n);
                CommandList cl(dev);
                cl.enable_timestamps(2);
                cl.begin(true);
                w.record(K, cl, v);
                cl.mark("attention");
                cl.end();
                double best = 1e30;
                for (int rep = 0; rep < 5; ++rep) {
                    cl.submit_and_wait();
                    for (const auto& [label, ms] : cl.times())
                        if (label == "attention") best = std::min(best, ms);
                }
                // Keys seen by all rows; each costs 2·hd flops for the score and 2·hd for the
                // value.
                const double keys = (double)n * start + (double)n * (n + 1) / 2;
                const double flop = 4.0 * m.hd * m.n_head * keys;
                // A K and a V row of one key/value head are 4·hd bytes (F16). Reading the
                // history per row and head costs that for every key of every query head; a
                // workgroup reads it once for the keys of its last row.
                const double per_row_head = keys * 4.0 * m.hd * m.n_head;
                double tiled = 0;
                for (uint32_t r0 = 0; r0 < n; r0 += rows)
                    tiled +=
                        (double)(m.n_head / heads) * (start + std::min(r0 + rows, n)) * 4.0 * m.hd;
                fmt::print(
                    "window attention {}, {} rows at {}: {:.3f} ms, {:.2f} TFLOP/s; cache reads "
                    "{:.1f} MiB ({:.1f} KiB a row), per row and head {:.1f} MiB\n",
                    m.name, n, start, best, flop / (best * 1e-3) / 1e12, tiled / 1048576,
                    tiled / n / 1024, per_row_head / 1048576);
                auto out = test::from_device<float>(dev, w.act, w.n_act);
                for (uint32_t r : {0u, n / 2, n - 1})
                    for (uint32_t h : {0u, 5u, m.n_head - 1}) {
                        w.check(out, r, h, cf.path == Path::cm2 || cf.path == Path::khr);
                        if (HasFatalFailure()) break;
                    }
                if (HasFatalFailure()) break;
            }
            if (HasFatalFailure()) break;
        }
}

}  // namespace
}  // namespace dl::vk
