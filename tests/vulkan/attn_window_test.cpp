// The window attention (Kernels::attention_rows: prep, then the tiled flash attention over the F16
// KV cache) against a plain double-precision causal softmax, at the boundaries of its tiles: one
// row, one row past a query tile, several query tiles, windows starting after earlier windows'
// cache rows (at positions that are not a key tile multiple), head sizes 64 to 256 and odd
// multiples, grouped-query ratios 1 to 8, with and without the sigmoid gate.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

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

class WindowAttention : public ::testing::TestWithParam<WindowCase> {};

TEST_P(WindowAttention, MatchesDoubleReference) {
    VK_TEST_DEVICE();
    const WindowCase c = GetParam();
    const uint32_t hd = c.head_dim, nh = c.n_head, nkv = c.n_kv, grp = nh / nkv;
    const Kernels::AttentionTiles tiles = Kernels::attention_tiles(dev.features(), hd, nh, nkv);
    const uint32_t n = c.row_tiles * tiles.rows + c.extra_rows;
    ASSERT_GE(n, 1u);
    const uint32_t n_ctx = c.start + n + 5;  // rows past the window stay poisoned (NaN)

    // act: q projection (with the gate after each head's q) | k | v | prepared q | output, the
    // output rows spaced by a gap that must stay untouched.
    const uint32_t q_stride = c.gate ? 2 * hd : hd, q_row = nh * q_stride, kv_row = nkv * hd,
                   o_row = nh * hd + 6;
    const uint32_t q_off = 0, k_off = q_off + n * q_row, v_off = k_off + n * kv_row,
                   qo_off = v_off + n * kv_row, o_off = qo_off + n * nh * hd,
                   n_act = o_off + n * o_row;
    std::mt19937 rng(hd * 131 + nh * 17 + nkv * 7 + c.start + n);
    // Queries three times larger than the keys make the softmax peaked, so a wrong running max
    // or a missed key shows.
    std::vector<float> in = test::randn(n_act, rng, 3.f);
    for (uint32_t i = qo_off; i < n_act; ++i) std::memcpy(&in[i], &test::kPoison, 4);
    Buffer act = test::to_device(dev, in);

    // Earlier windows' cache rows, then the poison the window's own rows overwrite.
    const size_t row_halves = (size_t)nkv * hd, cache_words = n_ctx * row_halves / 2;
    std::vector<uint16_t> Kh(n_ctx * row_halves), Vh(Kh.size());
    std::normal_distribution<float> nd(0.f, 1.f);
    for (size_t i = 0; i < c.start * row_halves; ++i) {
        Kh[i] = f32_to_f16(nd(rng));
        Vh[i] = f32_to_f16(nd(rng));
    }
    std::vector<uint32_t> kw(cache_words, test::kPoison), vw(cache_words, test::kPoison);
    std::memcpy(kw.data(), Kh.data(), c.start * row_halves * 2);
    std::memcpy(vw.data(), Vh.data(), c.start * row_halves * 2);
    Buffer kc = test::to_device(dev, kw), vc = test::to_device(dev, vw);
    // The window's rows as the prep stores them (no norms, no rope: q passes through).
    for (uint32_t r = 0; r < n; ++r)
        for (uint32_t i = 0; i < kv_row; ++i) {
            Kh[(c.start + r) * row_halves + i] = f32_to_f16(in[k_off + r * kv_row + i]);
            Vh[(c.start + r) * row_halves + i] = f32_to_f16(in[v_off + r * kv_row + i]);
        }

    Buffer params = dev.create_buffer(16, MemoryKind::device);
    Buffer tok = dev.create_buffer(16, MemoryKind::host);
    static_cast<uint32_t*>(tok.mapped())[0] = c.start;
    Kernels::AttentionRows a{};
    a.a = Kernels::Attention{nh,
                             nkv,
                             hd,
                             0,
                             n_ctx,
                             q_off,
                             q_stride,
                             k_off,
                             v_off,
                             qo_off,
                             o_off,
                             c.gate ? q_off + hd : Kernels::kNone,
                             q_stride,
                             Kernels::kNone,
                             Kernels::kNone,
                             0,
                             1e-6f};
    a.q_row = q_row;
    a.kv_row = kv_row;
    a.o_row = o_row;
    a.gate_row = q_row;
    test::run(dev, [&](CommandList& cl) {
        K.attention_rows(cl, a, view(act), view(params), view(kc), view(vc), view(tok), n);
    });
    auto out = test::from_device<float>(dev, act, n_act);

    const double scale = 1.0 / std::sqrt((double)hd);
    std::vector<double> s, o(hd);
    for (uint32_t r = 0; r < n; ++r) {
        const uint32_t pos = c.start + r;
        for (uint32_t h = 0; h < nh; ++h) {
            const float* q = &in[q_off + r * q_row + h * q_stride];
            const size_t kv = (size_t)(h / grp) * hd;
            s.assign(pos + 1, 0.0);
            double mx = -INFINITY;
            for (uint32_t j = 0; j <= pos; ++j) {
                double dot = 0;
                for (uint32_t d = 0; d < hd; ++d)
                    dot += (double)q[d] * f16_to_f32(Kh[j * row_halves + kv + d]);
                s[j] = dot * scale;
                mx = std::max(mx, s[j]);
            }
            double sum = 0;
            for (double& x : s) sum += (x = std::exp(x - mx));
            std::fill(o.begin(), o.end(), 0.0);
            for (uint32_t j = 0; j <= pos; ++j)
                for (uint32_t d = 0; d < hd; ++d)
                    o[d] += s[j] / sum * f16_to_f32(Vh[j * row_halves + kv + d]);
            for (uint32_t d = 0; d < hd; ++d) {
                double want = o[d];
                if (c.gate) want /= 1.0 + std::exp(-(double)q[hd + d]);
                const float got = out[o_off + r * o_row + h * hd + d];
                ASSERT_TRUE(std::isfinite(got)) << "row " << r << " head " << h << " dim " << d;
                ASSERT_NEAR(got, want, 1e-4 * (1 + std::fabs(want)))
                    << "row " << r << " head " << h << " dim " << d;
            }
        }
        for (uint32_t i = nh * hd; i < o_row; ++i)
            ASSERT_EQ(test::bits(out[o_off + r * o_row + i]), test::kPoison)
                << "gap after row " << r << " written";
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, WindowAttention,
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
    [](const auto& info) {
        const WindowCase& c = info.param;
        return fmt::format("d{}h{}kv{}at{}_{}tiles_plus{}{}", c.head_dim, c.n_head, c.n_kv, c.start,
                           c.row_tiles, c.extra_rows, c.gate ? "_gated" : "");
    });

// Every tile shape chosen fits the device and covers whole groups of query heads.
TEST(WindowAttentionTiles, FitTheDevice) {
    VK_TEST_DEVICE();
    const Features& f = dev.features();
    for (uint32_t hd : {2u, 32u, 64u, 80u, 96u, 128u, 200u, 256u})
        for (uint32_t grp : {1u, 2u, 3u, 4u, 8u}) {
            auto t = Kernels::attention_tiles(f, hd, 2 * grp, 2);
            EXPECT_LE(t.shared_bytes, f.max_shared_memory) << hd;
            EXPECT_LE(t.threads, f.max_workgroup_invocations) << hd;
            EXPECT_EQ(grp % t.heads, 0u) << hd << " " << grp;
            EXPECT_EQ(t.rows * t.heads, t.query_vectors);
            EXPECT_EQ(t.keys % t.keys_per_thread, 0u);
        }
    Features tiny = f;
    tiny.max_shared_memory = 1024;
    EXPECT_THROW(Kernels::attention_tiles(tiny, 256, 16, 4), Error);
}

}  // namespace
}  // namespace dl::vk
