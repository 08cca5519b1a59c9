// The CPU chain against an independent double-precision reference (reference_forward.cpp) and
// against itself: prefill vs token-by-token decode across DeltaNet chunk and prefill window
// boundaries, all-rows vs last-row logits, split prompts, thread counts, quantized weights vs
// their f32 twin, and the errors a caller can provoke.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/threads.h"
#include "cpu/chain.h"
#include "cpu/reference_forward.h"
#include "model/tiny_model.h"

namespace dl {
namespace {

using cpu::Chain;
using cpu::ChainOptions;
using test::TinySpec;

// ||a - b|| / ||b|| over one row of logits.
template <typename A, typename B>
double rel_err(const A* a, const B* b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; ++i) {
        double d = double(a[i]) - double(b[i]);
        num += d * d;
        den += double(b[i]) * double(b[i]);
    }
    return std::sqrt(num / den);
}

bool all_finite(const std::vector<float>& v) {
    for (float x : v)
        if (!std::isfinite(x)) return false;
    return true;
}

TinySpec qwen35_spec() {
    return TinySpec{};
}
TinySpec qwen3_spec() {
    TinySpec s;
    s.arch = "qwen3";
    s.n_layer = 2;
    s.rope_dims = s.head_dim;
    s.tied = true;
    return s;
}
TinySpec llama_spec() {
    TinySpec s;
    s.arch = "llama";
    s.n_layer = 2;
    s.rope_dims = s.head_dim;
    s.rope_freqs = true;
    return s;
}

// Logits of every token decoded one at a time.
std::vector<std::vector<float>> decode_all(Chain& chain, const std::vector<int32_t>& toks) {
    auto s = chain.new_session(static_cast<int64_t>(toks.size()));
    std::vector<std::vector<float>> out;
    std::vector<float> logits;
    for (int32_t t : toks) {
        chain.decode(*s, t, logits);
        out.push_back(logits);
    }
    EXPECT_EQ(s->n_past, static_cast<int64_t>(toks.size()));
    return out;
}

// Prefill (all rows) of the first n tokens against the decode logits, for each n.
void check_prefill_matches_decode(const TinySpec& spec, double bound) {
    auto model = test::tiny_model(spec);
    Chain chain(model);
    const int64_t V = model->hp.n_vocab;
    auto toks = test::tiny_tokens(130, V);
    auto dec = decode_all(chain, toks);
    double worst = 0;
    for (int64_t n : {1, 3, 63, 64, 65, 130}) {
        auto s = chain.new_session(200);
        std::vector<float> logits(static_cast<size_t>(n * V), NAN);
        chain.prefill(*s, std::span(toks.data(), static_cast<size_t>(n)), LogitsRows::all, logits);
        ASSERT_EQ(logits.size(), static_cast<size_t>(n * V));
        ASSERT_TRUE(all_finite(logits));
        EXPECT_EQ(s->n_past, n);
        for (int64_t t = 0; t < n; ++t) {
            double e = rel_err(logits.data() + t * V, dec[t].data(), V);
            worst = std::max(worst, e);
            ASSERT_LT(e, bound) << spec.arch << " n=" << n << " row " << t;
        }
    }
    std::printf("[ chain    ] %s prefill vs decode: worst relative logit difference %.3g\n",
                spec.arch.c_str(), worst);
}

// Both paths write and read the same f16 KV rows and use the same dot products, so on attention
// models they differ only in the float summation order of batched vs single dot products (a few
// ulps). On qwen35 the DeltaNet runs in its chunked form in prefill and its step form in decode:
// the same sums regrouped, with float error growing slowly with the number of tokens.
TEST(Chain, PrefillMatchesDecodeQwen35) {
    check_prefill_matches_decode(qwen35_spec(), 2e-5);
}
TEST(Chain, PrefillMatchesDecodeQwen3) {
    check_prefill_matches_decode(qwen3_spec(), 2e-6);
}
TEST(Chain, PrefillMatchesDecodeLlama) {
    check_prefill_matches_decode(llama_spec(), 2e-6);
}

TEST(Chain, LastRowEqualsLastOfAllRows) {
    for (const TinySpec& spec : {qwen35_spec(), qwen3_spec()}) {
        auto model = test::tiny_model(spec);
        Chain chain(model);
        const int64_t V = model->hp.n_vocab;
        auto toks = test::tiny_tokens(77, V);
        auto a = chain.new_session(77), b = chain.new_session(77);
        std::vector<float> all, last(static_cast<size_t>(V), NAN);
        chain.prefill(*a, toks, LogitsRows::all, all);
        chain.prefill(*b, toks, LogitsRows::last, last);
        ASSERT_EQ(last.size(), static_cast<size_t>(V));
        ASSERT_TRUE(all_finite(last));
        EXPECT_LT(rel_err(last.data(), all.data() + 76 * V, V), 1e-6) << spec.arch;
    }
}

// Windows shorter than the conv taps (2 < K-1 = 3), windows that split chunks, and a prompt
// given in pieces all continue the same state.
TEST(Chain, WindowsAndSplitPromptsContinueTheState) {
    auto model = test::tiny_model(qwen35_spec());
    const int64_t V = model->hp.n_vocab;
    auto toks = test::tiny_tokens(70, V);
    Chain ref_chain(model);
    auto dec = decode_all(ref_chain, toks);
    for (ChainOptions opt : {ChainOptions{false, 2, 64}, ChainOptions{false, 16, 5},
                             ChainOptions{false, 128, 1}, ChainOptions{false, 33, 64}}) {
        Chain chain(model, opt);
        auto s = chain.new_session(70);
        std::vector<float> logits;
        size_t done = 0;
        for (size_t piece : {1u, 2u, 30u, 37u}) {
            chain.prefill(*s, std::span(toks.data() + done, piece), LogitsRows::all, logits);
            for (size_t t = 0; t < piece; ++t)
                ASSERT_LT(rel_err(logits.data() + t * V, dec[done + t].data(), V), 2e-5)
                    << "window " << opt.window << " chunk " << opt.deltanet_chunk << " token "
                    << done + t;
            done += piece;
        }
        EXPECT_EQ(s->n_past, 70);
    }
}

// Against the double-precision reference with an f32 KV cache: what remains is float rounding
// in the chain (products of length <= 96, norms, the DeltaNet state carried in float over 70
// tokens, rotary angles formed in float as the PyTorch reference does: |pos * theta| < 70 gives
// an angle error below 70 * 2^-24 ~ 4e-6), measured at 2e-7..1e-5.
void check_reference(const TinySpec& spec, bool f32_kv, double bound) {
    auto model = test::tiny_model(spec);
    ChainOptions opt;
    opt.f32_kv_cache = f32_kv;
    Chain chain(model, opt);
    const int64_t V = model->hp.n_vocab;
    auto toks = test::tiny_tokens(70, V, 11);
    auto ref = test::reference_forward(*model, toks);
    auto s = chain.new_session(70);
    std::vector<float> pre;
    chain.prefill(*s, toks, LogitsRows::all, pre);
    auto dec = decode_all(chain, toks);
    double worst = 0;
    for (size_t t = 0; t < toks.size(); ++t) {
        double e1 = rel_err(pre.data() + t * V, ref[t].data(), V);
        double e2 = rel_err(dec[t].data(), ref[t].data(), V);
        worst = std::max({worst, e1, e2});
        ASSERT_LT(e1, bound) << spec.arch << " prefill row " << t;
        ASSERT_LT(e2, bound) << spec.arch << " decode token " << t;
    }
    std::printf("[ chain    ] %s (%s KV) vs double reference: worst relative logit error %.3g\n",
                spec.arch.c_str(), f32_kv ? "f32" : "f16", worst);
}

// Prefix reuse: a snapshot taken after a prompt, restored into the same session after it went
// elsewhere, or into a fresh one, continues with the same logits, bit for bit.
TEST(Chain, SnapshotRestoresThePrefix) {
    for (const TinySpec& spec : {qwen35_spec(), llama_spec()}) {
        auto model = test::tiny_model(spec);
        Chain chain(model);
        const std::vector<int32_t> prefix = {3, 14, 15, 9, 26, 5}, other = {35, 8, 9, 7};
        auto a = chain.new_session(32);
        std::vector<float> lg, want, got;
        chain.prefill(*a, prefix, LogitsRows::last, lg);
        auto snap = chain.snapshot(*a);
        ASSERT_TRUE(snap);
        for (int32_t t : {7, 9, 32}) {
            chain.decode(*a, t, lg);
            want.insert(want.end(), lg.begin(), lg.end());
        }
        chain.prefill(*a, other, LogitsRows::last, lg);
        auto b = chain.new_session(32);
        for (SessionState* s : {a.get(), b.get()}) {
            ASSERT_TRUE(chain.restore(*s, *snap));
            EXPECT_EQ(s->n_past, (int64_t)prefix.size());
            got.clear();
            for (int32_t t : {7, 9, 32}) {
                chain.decode(*s, t, lg);
                got.insert(got.end(), lg.begin(), lg.end());
            }
            EXPECT_EQ(got, want) << spec.arch;
        }
        auto small = chain.new_session(4);
        EXPECT_THROW(chain.restore(*small, *snap), Error);
        Chain other_chain(model);
        auto c = other_chain.new_session(32);
        EXPECT_THROW(other_chain.restore(*c, *snap), Error);
    }
}

TEST(Chain, MatchesReferenceQwen35) {
    check_reference(qwen35_spec(), true, 5e-5);
    TinySpec tied = qwen35_spec();
    tied.tied = true;
    tied.seed = 5;
    tied.n_layer = 8;
    check_reference(tied, true, 5e-5);
}
TEST(Chain, MatchesReferenceQwen3) {
    check_reference(qwen3_spec(), true, 1e-5);
}
TEST(Chain, MatchesReferenceLlama) {
    check_reference(llama_spec(), true, 1e-5);
}

// With the default f16 KV cache, keys and values carry a relative rounding error of at most
// 2^-11 = 4.9e-4 each; attention outputs are convex combinations of the values (error <= 4.9e-4
// relative) with weights perturbed by the key rounding; the mixer output is a fraction of the
// residual stream, so logits move by well under 2e-3 relative.
TEST(Chain, F16CacheStaysCloseToReference) {
    check_reference(qwen35_spec(), false, 2e-3);
    check_reference(llama_spec(), false, 2e-3);
}

// Quantized matrices: the same float weights (same seed) stored in Q8_0 / Q4_K.
// (1) Against the double reference run on the same dequantized weights, the chain differs only
// by rounding its activations to 8 bits (Q8_0 blocks of 32, Q8_K blocks of 256: ~0.5% relative
// per element), which a 4-layer random model carries to the logits at about the same size.
// (2) Against the f32 model the logits also move by the weight rounding: Q8_0 (~0.4% relative
// per weight) a little, Q4_K (~4.5 bits, ~8% per weight) a lot; this model carries weight errors
// to the logits at roughly their own size (residual writes scaled by 0.3 keep it tame).
TEST(Chain, QuantizedWeightsStayNearF32) {
    TinySpec spec;
    spec.n_embd = 256;
    spec.n_ff = 512;
    spec.n_head = 4;
    spec.head_dim = 64;
    spec.rope_dims = 16;
    spec.d_state = 64;  // d_inner = 256
    spec.n_vocab = 300;
    spec.residual_gain = 0.3;
    const int64_t V = spec.n_vocab;
    auto toks = test::tiny_tokens(40, V);
    auto run = [&](std::shared_ptr<const Model> m) {
        Chain chain(m);
        auto s = chain.new_session(40);
        std::vector<float> logits;
        chain.prefill(*s, toks, LogitsRows::all, logits);
        EXPECT_TRUE(all_finite(logits));
        return logits;
    };
    auto base = run(test::tiny_model(spec));
    for (auto [type, bound] : {std::pair{QType::Q8_0, 0.04}, std::pair{QType::Q4_K, 0.3}}) {
        spec.matrix_type = type;
        auto qm = test::tiny_model(spec);
        auto q = run(qm);
        auto ref = test::reference_forward(*qm, toks);
        double vs_f32 = 0, vs_ref = 0;
        for (int64_t t = 0; t < 40; ++t) {
            vs_f32 = std::max(vs_f32, rel_err(q.data() + t * V, base.data() + t * V, V));
            vs_ref = std::max(vs_ref, rel_err(q.data() + t * V, ref[t].data(), V));
        }
        std::printf(
            "[ chain    ] %s weights: worst relative logit difference %.3g vs the f32 model, "
            "%.3g vs the reference on the same weights\n",
            std::string(qtype_name(type)).c_str(), vs_f32, vs_ref);
        EXPECT_LT(vs_ref, 0.03) << qtype_name(type);
        EXPECT_LT(vs_f32, bound) << qtype_name(type);
        EXPECT_GT(vs_f32, 1e-4) << "quantization must change something";
    }
}

TEST(Chain, ThreadCountDoesNotChangeTheAnswer) {
    auto model = test::tiny_model(qwen35_spec());
    const int64_t V = model->hp.n_vocab;
    auto toks = test::tiny_tokens(50, V);
    ThreadPool one(1), three(3);
    std::vector<float> a, b;
    Chain c1(model, {}, &one), c3(model, {}, &three);
    auto s1 = c1.new_session(50), s3 = c3.new_session(50);
    c1.prefill(*s1, toks, LogitsRows::all, a);
    c3.prefill(*s3, toks, LogitsRows::all, b);
    for (int64_t t = 0; t < 50; ++t)
        ASSERT_LT(rel_err(a.data() + t * V, b.data() + t * V, V), 1e-6);
}

TEST(Chain, Errors) {
    auto model = test::tiny_model(qwen35_spec());
    Chain chain(model), other(model);
    auto s = chain.new_session(4);
    std::vector<float> logits;
    EXPECT_THROW(chain.prefill(*s, std::vector<int32_t>{1, 2, 3, 4, 5}, LogitsRows::last, logits),
                 Error);
    EXPECT_EQ(s->n_past, 0);
    EXPECT_THROW(chain.prefill(*s, std::vector<int32_t>{1, 80}, LogitsRows::last, logits), Error);
    EXPECT_THROW(chain.decode(*s, -1, logits), Error);
    EXPECT_THROW(chain.prefill(*s, std::vector<int32_t>{}, LogitsRows::last, logits), Error);
    EXPECT_EQ(s->n_past, 0);
    {
        // A bad id in a later prefill window must not leave the first window applied.
        Chain small_windows(model, ChainOptions{false, 2, 64});
        auto w = small_windows.new_session(8);
        EXPECT_THROW(
            small_windows.prefill(*w, std::vector<int32_t>{1, 2, 3, 99}, LogitsRows::last, logits),
            Error);
        EXPECT_EQ(w->n_past, 0);
    }
    chain.prefill(*s, std::vector<int32_t>{1, 2, 3}, LogitsRows::last, logits);
    chain.decode(*s, 4, logits);
    EXPECT_THROW(chain.decode(*s, 5, logits), Error);
    EXPECT_THROW(other.decode(*s, 5, logits), Error);
    EXPECT_THROW(chain.new_session(0), Error);
    // Recurrent state cannot be rewound.
    EXPECT_FALSE(chain.truncate(*s, 2));
    EXPECT_TRUE(chain.truncate(*s, 4));
}

TEST(Chain, TruncateRewindsAttentionModels) {
    auto model = test::tiny_model(llama_spec());
    Chain chain(model);
    const int64_t V = model->hp.n_vocab;
    auto s = chain.new_session(16);
    std::vector<float> a, b;
    chain.prefill(*s, std::vector<int32_t>{5, 6, 7}, LogitsRows::last, a);
    chain.prefill(*s, std::vector<int32_t>{9, 9}, LogitsRows::last, b);
    ASSERT_TRUE(chain.truncate(*s, 2));
    EXPECT_EQ(s->n_past, 2);
    chain.decode(*s, 7, b);
    EXPECT_LT(rel_err(b.data(), a.data(), V), 1e-6);
    EXPECT_FALSE(chain.truncate(*s, 4));
}

}  // namespace
}  // namespace dl
