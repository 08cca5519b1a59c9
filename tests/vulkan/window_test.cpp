// Whole prefills in windows against the independent double-precision forward pass on the same
// weights: prompts of one row, fewer rows than the conv taps, one window, one row past it, two
// windows and more, followed by decoded tokens; qwen35 with H_v != H_k, qwen3 and llama; F32,
// Q8_0 and Q4_K weights; mixtures of experts in every form of their expert GEMMs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cpu/reference_forward.h"
#include "model/tiny_model.h"
#include "quant/quant.h"
#include "vk_test.h"
#include "vulkan/driver.h"

namespace dl::vk {
namespace {

using test::randn;

using dl::test::TinySpec;

constexpr int64_t kWindow = 8;

// Prefill of n tokens then `decoded` single tokens, every row's logits against the reference.
// Over bytes (GemvX::bytes: every GEMM of these short windows and every expert GEMV reads its
// rows rounded to bytes, as the decode GEMVs do), within 1 % (the rounding's own error is
// 0.3-0.8 % on these tiny models); a mixture's router may then take another expert where two
// lie a hair apart, and one such row (of 60) may miss by up to 10 %.
// tiles: a mixture's windows of 4 rows or more run their expert GEMMs as grouped GEMM tiles
// (Tuning::expert_tile_pairs 1: the tiny models' 8 experts, 2 a row), shorter ones as GEMVs;
// expand: the tiles over the expert stacks expanded to F16 (Tuning::expert_expand).
// skinny: every GEMM of these windows over Q4_K and Q6_K on the skinny GEMM (Tuning::gemm_skinny,
// no batched GEMV), on devices that have it.
// attention_parts: the windows' attention split into that many parts over its keys
// (Tuning::attention_rows_parts; -1: the launcher's rule).
struct PrefillForm {
    bool bytes = false, tiles = false, expand = false, skinny = false;
    int attention_parts = -1;
    bool expert_skinny = false;  // the expert tiles as the skinny GEMM's grouped form
    // the expert tiles in the experts' order on NV cooperative matrix 2, wherever the window's
    // pairs are one an expert on average (Tuning::expert_cm2_pairs)
    bool expert_cm2 = false;
    bool expert_cm2_blocks = false;  // and decoding the stacks' blocks in their loads
};
void check_window_prefill(const dl::test::TinySpec& spec, const PrefillForm& form = {}) {
    VK_TEST_DEVICE();
    const auto [bytes, tiles, expand, skinny, attention_parts, expert_skinny, expert_cm2,
                expert_cm2_blocks] = form;
    const std::string& arch = spec.arch;
    const QType type = spec.matrix_type;
    auto model = dl::test::tiny_model(spec);
    DriverOptions o;
    o.device = test::device_options();
    o.plan.n_ctx = 64;
    o.plan.sequences = 4;  // the windowed session beside its token-by-token twin
    o.plan.window = kWindow;
    if (bytes) {  // the batched GEMV over bytes, where the skinny GEMM would take the rows
        if (!dev.features().integer_dot) GTEST_SKIP() << "no integer dot products";
        o.tuning.gemv_x = Kernels::GemvX::bytes;
        o.tuning.gemm_skinny = false;
    }
    o.tuning.expert_tile_pairs = tiles ? 1 : 0;
    o.tuning.expert_expand = expand;
    o.tuning.attention_rows_parts = attention_parts;
    if (skinny || expert_skinny) {
        if (!Kernels::gemm_uses_skinny(dev.features(), dev.variant()))
            GTEST_SKIP() << "no skinny GEMM on this device or build";
    }
    if (skinny) {
        o.tuning.gemm_skinny = true;
        o.tuning.gemm_gemv_rows = 0;
    }
    o.tuning.expert_skinny = expert_skinny;
    o.tuning.expert_cm2_pairs = expert_cm2 ? 1 : 0;
    o.tuning.expert_cm2_blocks = expert_cm2_blocks;
    if (expert_cm2 && !Kernels::gemm_uses_cm2(dev.features(), dev.variant()))
        GTEST_SKIP() << "no NV cooperative matrix 2 tiles on this device or build";
    auto drv = ResidentDriver::create(model, o);
    ASSERT_TRUE(drv.ok()) << drv.reason();
    ResidentDriver& d = **drv;
    ASSERT_EQ(d.plan().window, kWindow) << d.plan().window_decline;
    if (bytes) {
        ASSERT_NE(d.batch_plan(kWindow, true).describe().find("round_rows"), std::string::npos);
    }
    if (attention_parts >= 2) {  // every attention the kernel can split, split with scratch
        const WindowPlan w = d.window_plan(*d.new_session(64), kWindow, false);
        const Variant av = Kernels::attention_variant(dev.features(), d.plan().variant,
                                                      (uint32_t)model->hp.head_dim);
        size_t all = 0;
        for (const WindowItem& i : w.items) {
            if (i.kind != WindowItem::Kind::attention_rows) continue;
            ++all;
            const bool splits =
                Kernels::attention_rows_split(dev.features(), o.tuning, i.attention.a,
                                              i.rows ? i.rows : kWindow, av, 0)
                    .parts > 1;
            ASSERT_EQ(i.split.parts.range > 0, splits) << w.describe();
        }
        ASSERT_GT(all, 0u) << w.describe();
    }
    if (arch.ends_with("moe")) {
        const std::string p = d.batch_plan(kWindow, true).describe();
        ASSERT_EQ(p.find("gemm_experts") != std::string::npos, tiles) << p;
        ASSERT_EQ(p.find("gemv_experts") != std::string::npos, !tiles) << p;
        const std::string w = d.window_plan(*d.new_session(64), kWindow, false).describe();
        // (The sorted tiles read the stacks expanded unless told to decode their blocks.)
        const bool expanded = expand || (expert_cm2 && !expert_cm2_blocks);
        ASSERT_EQ(w.find("expand blk.0.ffn_down_exps") != std::string::npos, expanded) << w;
        const size_t down = w.find(expert_cm2 ? "gemm_experts_sorted blk.0.ffn_down_exps"
                                              : "gemm_experts blk.0.ffn_down_exps");
        ASSERT_EQ(down != std::string::npos, tiles) << w;
        if (tiles) {  // the tiles read the expansion
            ASSERT_EQ(w.substr(down, w.find('\n', down) - down).find("f16@") != std::string::npos,
                      expanded)
                << w;
        }
    }
    // F32 activations and an F16 KV cache on the scalar tiles; F16 tiles round every GEMM input.
    const bool cm = Kernels::gemm_uses_coopmat(d.device().features(), d.plan().variant);
    const double tol = bytes ? 1e-2 : cm ? 1e-2 : 2e-3;
    int flips = 0;  // rows over bytes past tol, within 10 %
    auto check = [&](double e, const std::string& what) {
        if (bytes && e > tol && e <= 0.1 && arch.ends_with("moe") && ++flips <= 1) return;
        EXPECT_LE(e, tol) << arch << " " << qtype_name(type) << " " << what;
    };
    std::vector<int32_t> all_tokens;
    std::mt19937 rng(3);
    for (int i = 0; i < 2 * kWindow + 4; ++i)
        all_tokens.push_back((int32_t)(rng() % model->hp.n_vocab));
    const auto ref = dl::test::reference_forward(*model, all_tokens);
    const size_t V = (size_t)model->hp.n_vocab;
    // 1 row; 2 and 3 (fewer than the 4 conv taps); a window; one past; two windows and more.
    for (size_t n : {1, 2, 3, 8, 9, 17}) {
        auto s = d.new_session(64);
        std::vector<float> lg;
        d.prefill(*s, std::span(all_tokens.data(), n), LogitsRows::all, lg);
        ASSERT_EQ(lg.size(), n * V);
        for (size_t i = 0; i < n; ++i) {
            for (size_t j = 0; j < V; ++j) ASSERT_TRUE(std::isfinite(lg[i * V + j])) << i;
            check(test::rel_err({lg.data() + i * V, V}, ref[i]),
                  fmt::format("prompt {} row {}", n, i));
        }
        // The window leaves the KV cache, conv ring and state where decode continues.
        for (size_t i = n; i < n + 3; ++i) {
            d.decode(*s, all_tokens[i], lg);
            check(test::rel_err(lg, ref[i]), fmt::format("prompt {} then token {}", n, i));
        }
        // Last-row logits only: the same values as that row of the full prefill.
        auto s2 = d.new_session(64);
        std::vector<float> last;
        d.prefill(*s2, std::span(all_tokens.data(), n), LogitsRows::last, last);
        ASSERT_EQ(last.size(), V);
        check(test::rel_err(last, ref[n - 1]), fmt::format("last row of {}", n));
    }
}

void check_window_prefill(const std::string& arch, QType type) {
    check_window_prefill(test::parity_spec(arch, type));
}

TEST(WindowPrefill, Qwen35F32) {
    check_window_prefill("qwen35", QType::F32);
}
TEST(WindowPrefill, Qwen35Q8) {
    check_window_prefill("qwen35", QType::Q8_0);
}
TEST(WindowPrefill, Qwen35Q4K) {
    check_window_prefill("qwen35", QType::Q4_K);
}
TEST(WindowPrefill, Qwen3F32) {
    check_window_prefill("qwen3", QType::F32);
}
TEST(WindowPrefill, Qwen3Q8) {
    check_window_prefill("qwen3", QType::Q8_0);
}
TEST(WindowPrefill, Qwen3Q4K) {
    check_window_prefill("qwen3", QType::Q4_K);
}
TEST(WindowPrefill, LlamaF32) {
    check_window_prefill("llama", QType::F32);
}
TEST(WindowPrefill, LlamaQ8) {
    check_window_prefill("llama", QType::Q8_0);
}
TEST(WindowPrefill, LlamaQ4K) {
    check_window_prefill("llama", QType::Q4_K);
}
// Mixtures of experts: each window's rows grouped by expert for the expert GEMVs (the prompts of
// 2 and 3 rows, under one pair an expert of the tiny models' 2 of 8, in the rows' order).
TEST(WindowPrefill, Qwen3MoeF32) {
    check_window_prefill(test::moe_spec("qwen3moe"));
}
TEST(WindowPrefill, Qwen35MoeF32) {
    check_window_prefill(test::moe_spec("qwen35moe"));
}
TEST(WindowPrefill, Qwen35MoeQ4K) {
    check_window_prefill(test::moe_spec("qwen35moe", QType::Q4_K));
}
// Over bytes: the batched GEMVs of the windows' GEMMs and the expert GEMVs.
TEST(WindowPrefill, Qwen35Q4KOverBytes) {
    check_window_prefill(test::parity_spec("qwen35", QType::Q4_K), {.bytes = true});
}
TEST(WindowPrefill, Qwen35MoeQ4KOverBytes) {
    check_window_prefill(test::moe_spec("qwen35moe", QType::Q4_K), {.bytes = true});
}
TEST(WindowPrefill, Qwen3MoeQ8OverBytes) {
    check_window_prefill(test::moe_spec("qwen3moe", QType::Q8_0), {.bytes = true});
}
// The expert GEMMs as grouped GEMM tiles (the shared expert's and the rest over bytes, if so).
TEST(WindowPrefill, Qwen35MoeF32ExpertTiles) {
    check_window_prefill(test::moe_spec("qwen35moe"), {.tiles = true});
}
TEST(WindowPrefill, Qwen35MoeQ4KExpertTiles) {
    check_window_prefill(test::moe_spec("qwen35moe", QType::Q4_K), {.tiles = true});
}
TEST(WindowPrefill, Qwen35MoeQ4KExpertTilesSkinny) {
    check_window_prefill(test::moe_spec("qwen35moe", QType::Q4_K),
                         {.tiles = true, .expert_skinny = true});
}
TEST(WindowPrefill, Qwen3MoeQ8ExpertTilesOverBytes) {
    check_window_prefill(test::moe_spec("qwen3moe", QType::Q8_0), {.bytes = true, .tiles = true});
}
// The skinny GEMMs of few rows over the K-quants, the dense and the shared experts'.
TEST(WindowPrefill, Qwen35Q4KSkinny) {
    check_window_prefill(test::parity_spec("qwen35", QType::Q4_K), {.skinny = true});
}
TEST(WindowPrefill, Qwen3Q4KSkinny) {
    check_window_prefill(test::parity_spec("qwen3", QType::Q4_K), {.skinny = true});
}
TEST(WindowPrefill, Qwen35MoeQ4KSkinny) {
    check_window_prefill(test::moe_spec("qwen35moe", QType::Q4_K), {.skinny = true});
}
// The windows' attention split over its keys into three parts (the later windows' history of a
// tile or two leaves some parts without keys).
TEST(WindowPrefill, Qwen35Q8AttentionSplit) {
    check_window_prefill(test::parity_spec("qwen35", QType::Q8_0), {.attention_parts = 3});
}
TEST(WindowPrefill, Qwen3F32AttentionSplit) {
    check_window_prefill(test::parity_spec("qwen3", QType::F32), {.attention_parts = 3});
}
TEST(WindowPrefill, LlamaQ4KAttentionSplit) {
    check_window_prefill(test::parity_spec("llama", QType::Q4_K), {.attention_parts = 2});
}
// ...over the expert stacks expanded to F16 (the tiles round their weights to F16 either way).
TEST(WindowPrefill, Qwen35MoeQ4KExpertTilesOverF16) {
    check_window_prefill(test::moe_spec("qwen35moe", QType::Q4_K), {.tiles = true, .expand = true});
}
TEST(WindowPrefill, Qwen3MoeQ8ExpertTilesOverF16) {
    check_window_prefill(test::moe_spec("qwen3moe", QType::Q8_0), {.tiles = true, .expand = true});
}
// ...in the experts' order on the NV tiles (windows of 8 and 9 rows; 2 and 3 rows stay under
// one pair an expert and take the other tiles).
TEST(WindowPrefill, Qwen35MoeQ4KSortedExpertTiles) {
    check_window_prefill(test::moe_spec("qwen35moe", QType::Q4_K),
                         {.tiles = true, .expert_cm2 = true});
}
TEST(WindowPrefill, Qwen3MoeQ4KSortedExpertTiles) {
    check_window_prefill(test::moe_spec("qwen3moe", QType::Q4_K),
                         {.tiles = true, .expert_cm2 = true});
}
TEST(WindowPrefill, Qwen35MoeQ4KSortedExpertTilesOverBlocks) {
    check_window_prefill(test::moe_spec("qwen35moe", QType::Q4_K),
                         {.tiles = true, .expert_cm2 = true, .expert_cm2_blocks = true});
}

}  // namespace
}  // namespace dl::vk
