// Decode attention (q/k norm + partial NeoX rope + F16 KV store, split-K attention, combine with
// the sigmoid gate, and the output's rounding to bytes where asked) against the CPU chain's ops
// over many tokens, so several splits fill up and grouped-query heads share their key/value head.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>

#include "core/error.h"
#include "core/half.h"
#include "cpu/ops.h"
#include "model/rope.h"
#include "vk_test.h"

namespace dl::vk {
namespace {

struct AttnCase {
    uint32_t n_head, n_kv, head_dim, n_rot, n_ctx, tokens;
    bool norms, gate, interleaved = false;
    uint32_t max_splits = Kernels::kAttnMaxSplits;
    uint32_t one_split = 0;  // Kernels::attn_one_split (0: every context split as it comes)
    bool round = false;      // the output also rounded to bytes (Attention::round_off)
    uint32_t group = 0;      // Attention::heads_a_group (0: the launcher's choice)
};

class Attention : public ::testing::TestWithParam<AttnCase> {};

TEST_P(Attention, MatchesCpuOverManyTokens) {
    VK_TEST_DEVICE();
    const AttnCase c = GetParam();
    const float eps = 1e-6f, base = 1e7f;
    std::mt19937 rng(c.head_dim + c.n_head);
    std::normal_distribution<float> nd(0.f, 1.f);
    auto randn = [&](size_t n) {
        std::vector<float> v(n);
        for (float& x : v) x = nd(rng);
        return v;
    };
    const uint32_t hd = c.head_dim;
    const uint32_t q_stride = c.gate ? 2 * hd : hd;
    // act: q projection | k | v | prepared q | output | its rounding
    const uint32_t q_off = 0, k_off = c.n_head * q_stride, v_off = k_off + c.n_kv * hd,
                   qo_off = v_off + c.n_kv * hd, o_off = qo_off + c.n_head * hd,
                   ro_off = o_off + c.n_head * hd,
                   n_act = ro_off + Kernels::rounding_floats(c.n_head * hd);
    // params: q norm | k norm | inverse frequencies
    std::vector<float> qn = randn(hd), kn = randn(hd), inv(c.n_rot / 2);
    rope_inv_freq(base, c.n_rot, nullptr, inv.data());
    std::vector<float> params;
    params.insert(params.end(), qn.begin(), qn.end());
    params.insert(params.end(), kn.begin(), kn.end());
    params.insert(params.end(), inv.begin(), inv.end());
    Buffer pb = test::to_device(dev, params);

    Kernels::Attention a{c.n_head,
                         c.n_kv,
                         hd,
                         c.n_rot,
                         c.n_ctx,
                         q_off,
                         q_stride,
                         k_off,
                         v_off,
                         qo_off,
                         o_off,
                         c.gate ? q_off + hd : Kernels::kNone,
                         q_stride,
                         c.norms ? 0u : Kernels::kNone,
                         c.norms ? hd : Kernels::kNone,
                         2 * hd,
                         eps,
                         c.interleaved,
                         c.max_splits,
                         c.round ? ro_off : Kernels::kNone,
                         c.group};
    Buffer act = dev.create_buffer(n_act * 4, MemoryKind::device);
    // A paged cache in whole blocks, poisoned: rows past the live ones are read, and must not
    // reach the output.
    test::PagedCache kv = test::paged_cache(dev, c.n_ctx, c.n_kv, hd);
    Buffer part = dev.create_buffer(Kernels::attention_partials(a) * 4, MemoryKind::device);
    // The heads' split counters: back at 0 after every token.
    Buffer counter = dev.create_buffer((size_t)c.n_head * 4, MemoryKind::device);
    dev.fill(counter, 0, (size_t)c.n_head * 4, 0);

    std::vector<uint16_t> Kr((size_t)c.n_ctx * c.n_kv * hd), Vr(Kr.size());
    std::vector<float> scores(c.n_ctx), cosv(c.n_rot / 2), sinv(c.n_rot / 2);
    // Record once, replay per token: the position comes from the token buffer.
    CommandList cl(dev);
    cl.begin(true);
    const uint32_t one_split = K.tuning.attn_one_split;
    K.tuning.attn_one_split = c.one_split;
    K.attention(cl, a, view(act), view(pb), view(kv.k), view(kv.v), view(part), view(kv.tok),
                view(counter));
    K.tuning.attn_one_split = one_split;
    cl.end();
    for (uint32_t t = 0; t < c.tokens; ++t) {
        std::vector<float> in = randn(n_act);
        for (uint32_t i = qo_off; i < n_act; ++i) std::memcpy(&in[i], &test::kPoison, 4);
        dev.upload(act, 0, in.data(), n_act * 4);
        static_cast<uint32_t*>(kv.tok.mapped())[0] = t;
        cl.submit_and_wait();
        auto out = test::from_device<float>(dev, act, n_act);
        for (uint32_t v : test::from_device<uint32_t>(dev, counter, c.n_head))
            ASSERT_EQ(v, 0u) << "token " << t << ": a head's split counter was not reset";

        cpu::rope_angles(t, inv.data(), c.n_rot, cosv.data(), sinv.data());
        for (uint32_t j = 0; j < c.n_kv; ++j) {
            std::vector<float> k(in.begin() + k_off + j * hd, in.begin() + k_off + (j + 1) * hd);
            if (c.norms) cpu::rmsnorm(k.data(), kn.data(), k.data(), hd, eps);
            if (c.interleaved)
                cpu::rope_interleaved(k.data(), c.n_rot, cosv.data(), sinv.data());
            else
                cpu::rope_neox(k.data(), c.n_rot, cosv.data(), sinv.data());
            cpu::to_f16(k.data(), &Kr[((size_t)t * c.n_kv + j) * hd], hd);
            cpu::to_f16(&in[v_off + j * hd], &Vr[((size_t)t * c.n_kv + j) * hd], hd);
        }
        for (uint32_t h = 0; h < c.n_head; ++h) {
            std::vector<float> q(in.begin() + q_off + h * q_stride,
                                 in.begin() + q_off + h * q_stride + hd);
            if (c.norms) cpu::rmsnorm(q.data(), qn.data(), q.data(), hd, eps);
            if (c.interleaved)
                cpu::rope_interleaved(q.data(), c.n_rot, cosv.data(), sinv.data());
            else
                cpu::rope_neox(q.data(), c.n_rot, cosv.data(), sinv.data());
            uint32_t kvh = h / (c.n_head / c.n_kv);
            std::vector<float> o(hd);
            cpu::attend(q.data(), &Kr[kvh * hd], &Vr[kvh * hd], c.n_kv * hd, t + 1, hd,
                        1.f / std::sqrt((float)hd), scores.data(), o.data());
            for (uint32_t d = 0; d < hd; ++d) {
                float want = o[d];
                if (c.gate) want *= cpu::sigmoid(in[q_off + h * q_stride + hd + d]);
                float got = out[o_off + h * hd + d];
                ASSERT_TRUE(std::isfinite(got)) << "token " << t << " head " << h << " dim " << d;
                ASSERT_NEAR(got, want, 3e-3 * (1 + std::fabs(want)))
                    << "token " << t << " head " << h << " dim " << d;
            }
        }
        if (c.round) {
            // Each 16-value block of the output (checked above) in bytes: its largest magnitude
            // at 127, every value within half a step, the scaled sum of its bytes.
            const uint32_t n = c.n_head * hd;
            for (uint32_t e = 0; e < n / 16; ++e) {
                const std::string what = fmt::format("token {} block {}", t, e);
                test::RoundedBlock b;
                test::read_rounded_block(out, ro_off, n, e, what, b);
                if (HasFatalFailure()) return;
                float amax = 0.f;
                for (uint32_t j = 0; j < 16; ++j)
                    amax = std::max(amax, std::fabs(out[o_off + 16 * e + j]));
                ASSERT_NEAR(b.d, amax / 127.f, 1e-6f * amax) << what;
                for (uint32_t j = 0; j < 16; ++j) {
                    const float v = out[o_off + 16 * e + j];
                    ASSERT_NEAR(b.q[j] * b.d, v, 0.5f * b.d * (1 + 1e-4f))
                        << "token " << t << " output " << 16 * e + j;
                }
            }
        }
    }
    // Each token's key row went to its pool row; no other pool row was written.
    auto kback = test::from_device<uint32_t>(dev, kv.k, kv.pool_words);
    std::vector<bool> written(kv.pool_words / kv.row_words, false);
    for (uint32_t t = 0; t < c.tokens; ++t) written[kv.row(t)] = true;
    for (size_t r = 0; r < written.size(); ++r) {
        if (written[r]) continue;
        for (size_t w = 0; w < kv.row_words; ++w)
            ASSERT_EQ(kback[r * kv.row_words + w], test::kPoison) << "pool row " << r;
    }
    for (uint32_t t = 0; t < c.tokens; ++t) {
        std::vector<uint16_t> got(kv.row_words * 2);
        std::memcpy(got.data(), &kback[kv.row(t) * kv.row_words], got.size() * 2);
        // The same normed, rotated key (its F16 rounding may differ by a step).
        for (size_t i = 0; i < got.size(); ++i) {
            const float want = f16_to_f32(Kr[(size_t)t * c.n_kv * hd + i]);
            ASSERT_NEAR(f16_to_f32(got[i]), want, 2e-3f * (1 + std::fabs(want)))
                << "key row " << t << " value " << i;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Attention,
    ::testing::Values(
        AttnCase{4, 2, 64, 32, 150, 70, true, false},  // qwen3-like
        AttnCase{4, 1, 256, 64, 80, 66, true, true},   // qwen35 gated
        // Four query heads of one key/value head in a workgroup (heads of 256
        // take two).
        AttnCase{8, 2, 128, 64, 150, 70, true, false},        // qwen3-8b-like
        AttnCase{2, 2, 128, 128, 64, 9, false, false, true},  // llama
        AttnCase{3, 1, 20, 20, 80, 67, false, true},          // rows not 16-byte aligned
        // Rows of 48 words: value rows in steps, not loaded ahead of the scores.
        AttnCase{4, 2, 96, 32, 140, 70, true, false},
        // Two splits over up to five chunks: a split walks several chunks (its
        // online softmax rescales), the last one a short one.
        AttnCase{8, 4, 64, 64, 300, 260, true, false, false, 2},
        // Three splits, query heads of one key/value head three to a group.
        AttnCase{6, 2, 32, 16, 200, 140, false, true, false, 3},
        // One split (no merge) while the context has up to two or three chunks,
        // then split as above.
        AttnCase{4, 1, 256, 64, 300, 260, true, true, false, Kernels::kAttnMaxSplits, 2},
        AttnCase{8, 2, 128, 64, 450, 400, true, false, false, 4, 3},
        // The output also rounded to bytes: one split, then merged from several
        // (heads of 256 two a workgroup, of 128 four, of 64 two of one kv head).
        AttnCase{4, 1, 256, 64, 300, 200, true, true, false, Kernels::kAttnMaxSplits, 2, true},
        AttnCase{8, 2, 128, 64, 450, 400, true, false, false, 4, 3, true},
        AttnCase{4, 2, 64, 32, 150, 70, true, false, false, Kernels::kAttnMaxSplits, 0, true},
        // One query head a workgroup where the launcher would take two or four (the driver's
        // short-context form): split and merged, rounded, gated.
        AttnCase{4, 1, 256, 64, 300, 200, true, true, false, Kernels::kAttnMaxSplits, 2, true, 1},
        AttnCase{8, 2, 128, 64, 450, 400, true, false, false, 4, 3, true, 1},
        AttnCase{8, 2, 128, 64, 150, 70, true, false, false, Kernels::kAttnMaxSplits, 0, false, 2}),
    [](const auto& info) {
        const AttnCase& c = info.param;
        // fmt, not string +: GCC 12 warns (-Wrestrict) on that chain of temporaries.
        return fmt::format(
            "h{}kv{}d{}{}{}{}{}{}", c.n_head, c.n_kv, c.head_dim, c.gate ? "_gated" : "",
            c.max_splits < Kernels::kAttnMaxSplits ? fmt::format("_{}splits", c.max_splits)
                                                   : std::string(),
            c.one_split ? fmt::format("_one{}", c.one_split) : std::string(),
            c.round ? "_rounded" : "", c.group ? fmt::format("_g{}", c.group) : std::string());
    });

// prepare_attention() creates the very pipeline attention() then records with (the driver relies
// on it to place the short-context form's pipeline beside the launcher's): one pipeline for the
// prepared form however often it is recorded, a second one only for the other form; a group size
// that does not divide the heads of a key/value head is refused.
TEST(VulkanAttention, PreparedPipelineIsTheOneRecorded) {
    VK_TEST_DEVICE();
    Pipelines pipes(dev);
    Kernels k(dev, pipes);
    const uint32_t hd = 128, n_head = 8, n_kv = 2, n_ctx = 200;
    Kernels::Attention a{};
    a.n_head = n_head;
    a.n_kv = n_kv;
    a.head_dim = hd;
    a.n_rot = 64;
    a.n_ctx = n_ctx;
    a.q_stride = hd;
    a.k_off = n_head * hd;
    a.v_off = a.k_off + n_kv * hd;
    a.o_off = a.v_off + n_kv * hd;
    a.gate_off = Kernels::kNone;
    a.q_norm_off = Kernels::kNone;
    a.k_norm_off = Kernels::kNone;
    a.freq_off = 0;
    a.eps = 1e-6f;
    a.round_off = a.o_off + n_head * hd;
    const uint64_t n_act = a.round_off + Kernels::rounding_floats(n_head * hd);
    Buffer act = dev.create_buffer(n_act * 4, MemoryKind::device);
    Buffer params = dev.create_buffer(256, MemoryKind::device);
    test::PagedCache kv = test::paged_cache(dev, n_ctx, n_kv, hd);
    Buffer part = dev.create_buffer(Kernels::attention_partials(a) * 4, MemoryKind::device);
    Buffer counter = dev.create_buffer(n_head * 4, MemoryKind::device);
    auto record = [&](const Kernels::Attention& x) {
        CommandList cl(dev);
        cl.begin(true);
        k.attention(cl, x, view(act), view(params), view(kv.k), view(kv.v), view(part),
                    view(kv.tok), view(counter));
        cl.end();
    };
    Kernels::Attention one = a;
    one.heads_a_group = 1;
    ASSERT_EQ(k.attention_group(one), 1u);
    ASSERT_GT(k.attention_group(a), 1u);
    k.prepare_attention(one);
    EXPECT_EQ(pipes.size(), 1u);
    record(one);
    record(one);
    EXPECT_EQ(pipes.size(), 1u) << "attention() took another pipeline than the one prepared";
    record(a);
    EXPECT_EQ(pipes.size(), 2u);
    Kernels::Attention three = a;
    three.heads_a_group = 3;
    EXPECT_THROW(k.prepare_attention(three), Error);
}

// The rows of a batch in one dispatch (Attention::rows): three sequences at positions of their
// own (long enough that some split and merge), gated, with q/k norms, their words, partials and
// counters a stride apart, their caches in blocks of one pool that their tables interleave. Each
// row's output must be its own CPU reference; the counters are back at 0 after each step.
TEST(VulkanAttention, EveryBatchRowInOneDispatch) {
    VK_TEST_DEVICE();
    const uint32_t n_head = 4, n_kv = 1, hd = 64, n_rot = 32, n_ctx = 256, rows = 3;
    const std::vector<uint32_t> start = {0, 70, 131};  // each row's first position
    const float eps = 1e-6f;
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 1.f);
    auto randn = [&](size_t n) {
        std::vector<float> v(n);
        for (float& x : v) x = nd(rng);
        return v;
    };
    const uint32_t q_stride = 2 * hd, q_row = n_head * q_stride, k_row = n_kv * hd,
                   o_row = n_head * hd;
    // act: q rows | k rows | v rows | output rows
    const uint32_t k_off = rows * q_row, v_off = k_off + rows * k_row, o_off = v_off + rows * k_row,
                   n_act = o_off + rows * o_row;
    std::vector<float> qn = randn(hd), kn = randn(hd), inv(n_rot / 2);
    rope_inv_freq(1e7f, n_rot, nullptr, inv.data());
    std::vector<float> params = qn;
    params.insert(params.end(), kn.begin(), kn.end());
    params.insert(params.end(), inv.begin(), inv.end());
    Buffer pb = test::to_device(dev, params);

    Kernels::Attention a{n_head,         n_kv,  hd, n_rot,    n_ctx, 0,  q_stride, k_off, v_off,
                         Kernels::kNone, o_off, hd, q_stride, 0,     hd, 2 * hd,   eps};
    a.max_splits = 3;  // several splits, merged, at these lengths
    a.rows = rows;
    a.q_row = q_row;
    a.k_row = k_row;
    a.o_row = o_row;
    // One pool for all rows; row r's block j is pool block (j · rows + r), reversed.
    const uint32_t need = (uint32_t)Kernels::kv_blocks(n_ctx), blocks = need * rows;
    const size_t row_words = (size_t)n_kv * hd / 2,
                 pool_words = (size_t)blocks * Kernels::kKvBlock * row_words;
    Buffer kc = test::poisoned(dev, pool_words), vc = test::poisoned(dev, pool_words);
    a.tok_row = (uint32_t)(Kernels::tok_bytes(n_ctx) / 4) + 5;
    Buffer tok = dev.create_buffer((size_t)rows * a.tok_row * 4, MemoryKind::host);
    auto* words = static_cast<uint32_t*>(tok.mapped());
    std::memset(words, 0, (size_t)rows * a.tok_row * 4);
    for (uint32_t r = 0; r < rows; ++r)
        for (uint32_t j = 0; j < need; ++j)
            words[r * a.tok_row + Kernels::kKvTable + j] = blocks - 1 - (j * rows + r);
    a.part_row = (uint32_t)Kernels::attention_partials(a) + 3;
    Buffer part = dev.create_buffer((size_t)rows * a.part_row * 4, MemoryKind::device);
    a.counter_row = n_head + 2;
    Buffer counter = dev.create_buffer((size_t)rows * a.counter_row * 4, MemoryKind::device);
    dev.fill(counter, 0, (size_t)rows * a.counter_row * 4, 0);
    Buffer act = dev.create_buffer(n_act * 4, MemoryKind::device);

    CommandList cl(dev);
    cl.begin(true);
    K.attention(cl, a, view(act), view(pb), view(kc), view(vc), view(part), view(tok),
                view(counter));
    cl.end();
    // Each row's keys and values so far, as the kernel stores them: the rows before its start
    // position written here (F16 values of their own), the rest by the kernel.
    std::vector<std::vector<uint16_t>> Kr(rows, std::vector<uint16_t>((size_t)n_ctx * hd)), Vr = Kr;
    for (uint32_t r = 0; r < rows; ++r)
        for (uint32_t t = 0; t < start[r]; ++t) {
            std::vector<float> k = randn(hd), v = randn(hd);
            cpu::to_f16(k.data(), &Kr[r][(size_t)t * hd], hd);
            cpu::to_f16(v.data(), &Vr[r][(size_t)t * hd], hd);
            const size_t pool_row =
                (size_t)words[r * a.tok_row + Kernels::kKvTable + t / Kernels::kKvBlock] *
                    Kernels::kKvBlock +
                t % Kernels::kKvBlock;
            dev.upload(kc, pool_row * row_words * 4, &Kr[r][(size_t)t * hd], hd * 2);
            dev.upload(vc, pool_row * row_words * 4, &Vr[r][(size_t)t * hd], hd * 2);
        }
    std::vector<float> scores(n_ctx), cosv(n_rot / 2), sinv(n_rot / 2);
    for (uint32_t step = 0; step < 61; ++step) {
        std::vector<float> in = randn(n_act);
        for (uint32_t i = o_off; i < n_act; ++i) std::memcpy(&in[i], &test::kPoison, 4);
        dev.upload(act, 0, in.data(), n_act * 4);
        for (uint32_t r = 0; r < rows; ++r) words[r * a.tok_row] = start[r] + step;
        cl.submit_and_wait();
        auto out = test::from_device<float>(dev, act, n_act);
        for (uint32_t v : test::from_device<uint32_t>(dev, counter, rows * a.counter_row))
            ASSERT_EQ(v, 0u) << "step " << step << ": a counter was not reset";
        for (uint32_t r = 0; r < rows; ++r) {
            const uint32_t pos = start[r] + step;
            cpu::rope_angles(pos, inv.data(), n_rot, cosv.data(), sinv.data());
            std::vector<float> k(in.begin() + k_off + r * k_row,
                                 in.begin() + k_off + r * k_row + hd);
            cpu::rmsnorm(k.data(), kn.data(), k.data(), hd, eps);
            cpu::rope_neox(k.data(), n_rot, cosv.data(), sinv.data());
            cpu::to_f16(k.data(), &Kr[r][(size_t)pos * hd], hd);
            cpu::to_f16(&in[v_off + r * k_row], &Vr[r][(size_t)pos * hd], hd);
            for (uint32_t h = 0; h < n_head; ++h) {
                const uint32_t q0 = r * q_row + h * q_stride;
                std::vector<float> q(in.begin() + q0, in.begin() + q0 + hd);
                cpu::rmsnorm(q.data(), qn.data(), q.data(), hd, eps);
                cpu::rope_neox(q.data(), n_rot, cosv.data(), sinv.data());
                std::vector<float> o(hd);
                cpu::attend(q.data(), Kr[r].data(), Vr[r].data(), hd, pos + 1, hd,
                            1.f / std::sqrt((float)hd), scores.data(), o.data());
                for (uint32_t d = 0; d < hd; ++d) {
                    const float want = o[d] * cpu::sigmoid(in[q0 + hd + d]);
                    const float got = out[o_off + r * o_row + h * hd + d];
                    ASSERT_NEAR(got, want, 3e-3 * (1 + std::fabs(want)))
                        << "step " << step << " row " << r << " head " << h << " dim " << d;
                }
            }
        }
    }
}

// More than one row, with the output rounded, is refused.
TEST(VulkanAttention, RoundsTheOutputOfOneRowOnly) {
    VK_TEST_DEVICE();
    Kernels::Attention a{4,
                         1,
                         64,
                         32,
                         128,
                         0,
                         64,
                         256,
                         320,
                         Kernels::kNone,
                         384,
                         Kernels::kNone,
                         64,
                         Kernels::kNone,
                         Kernels::kNone,
                         0,
                         1e-6f};
    a.rows = 2;
    a.round_off = 640;
    Buffer b = dev.create_buffer(1 << 16, MemoryKind::device);
    CommandList cl(dev);
    cl.begin(true);
    EXPECT_THROW(K.attention(cl, a, view(b), view(b), view(b), view(b), view(b), view(b), view(b)),
                 Error);
}

TEST(VulkanAttention, DeclinesHeadSizesWithoutKernels) {
    VK_TEST_DEVICE();
    EXPECT_TRUE(Kernels::attention_supported(dev.features(), 512, 8, 2).has_value());
    EXPECT_TRUE(Kernels::attention_supported(dev.features(), 128, 6, 4).has_value());
    EXPECT_FALSE(Kernels::attention_supported(dev.features(), 256, 16, 4).has_value());
}

}  // namespace
}  // namespace dl::vk
