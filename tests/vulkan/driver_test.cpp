// The resident driver against the CPU chain on tiny models built in memory: logits of every
// decoded token (one recorded token command replayed), the greedy token chosen on the device,
// prefill, and the declines.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cpu/chain.h"
#include "model/tiny_model.h"
#include "vk_test.h"
#include "vulkan/driver.h"

namespace dl::vk {
namespace {

using dl::test::TinySpec;

DriverOptions test_options() {
    DriverOptions o;
    o.device = test::device_options();
    o.plan.n_ctx = 128;
    o.plan.sequences = 4;  // tests hold a few sessions at once
    return o;
}

// x: DriverOptions::gemv_x (bytes: the block-format GEMVs round x to bytes; skipped on devices
// without integer dot products). gated_in: Fusions::gated_norm_in_output. near_ties: the greedy
// token is compared only where the CPU chain's best logit leads its runner-up by more than twice
// the bound, which already fixes it (a byte rounded the other way may break a nearer tie either
// way).
void check_decode_parity(const TinySpec& spec, double tol,
                         Kernels::GemvX x = Kernels::GemvX::automatic, bool gated_in = true,
                         bool near_ties = false, uint32_t slots = 0) {
    VK_TEST_DEVICE();
    if (x == Kernels::GemvX::bytes && !dev.features().integer_dot)
        GTEST_SKIP() << "no integer dot products";
    auto model = dl::test::tiny_model(spec);
    DriverOptions o = test_options();
    o.tuning.gemv_x = x;
    o.fusions.gated_norm_in_output = gated_in;
    o.tuning.gemv_slots = slots;
    auto drv = ResidentDriver::create(model, o);
    ASSERT_TRUE(drv.ok()) << drv.reason();
    cpu::Chain chain(model);
    const std::vector<int32_t> toks = {1, 7, 42, 3, 3, 79, 0, 15, 8, 64};
    auto sg = (*drv)->new_session(64);
    auto sc = chain.new_session(64);
    std::vector<float> lg, lc;
    for (size_t i = 0; i < toks.size(); ++i) {
        (*drv)->decode(*sg, toks[i], lg);
        chain.decode(*sc, toks[i], lc);
        ASSERT_EQ(lg.size(), lc.size());
        double worst = 0, scale = 0;
        size_t best_g = 0, best_c = 0;
        for (size_t j = 0; j < lg.size(); ++j) {
            ASSERT_TRUE(std::isfinite(lg[j])) << "token " << i << " logit " << j;
            worst = std::max(worst, std::fabs((double)lg[j] - lc[j]));
            scale = std::max(scale, std::fabs((double)lc[j]));
            if (lg[j] > lg[best_g]) best_g = j;
            if (lc[j] > lc[best_c]) best_c = j;
        }
        EXPECT_LE(worst, tol * (1 + scale)) << spec.arch << " token " << i;
        double runner_up = -INFINITY;
        for (size_t j = 0; j < lc.size(); ++j)
            if (j != best_c) runner_up = std::max(runner_up, (double)lc[j]);
        if (!near_ties || lc[best_c] - runner_up > 2 * tol * (1 + scale)) {
            EXPECT_EQ(best_g, best_c) << spec.arch << " token " << i;
        }
    }
    EXPECT_EQ(sg->n_past, (int64_t)toks.size());
}

TEST(VulkanDriver, Qwen35DecodeMatchesCpuChain) {
    check_decode_parity(test::parity_spec("qwen35"), 2e-3);
}
TEST(VulkanDriver, Qwen3DecodeMatchesCpuChain) {
    check_decode_parity(test::parity_spec("qwen3"), 2e-3);
}
TEST(VulkanDriver, LlamaDecodeMatchesCpuChain) {
    check_decode_parity(test::parity_spec("llama"), 2e-3);
}

TEST(VulkanDriver, Qwen35Q8DecodeStaysClose) {
    TinySpec s = test::parity_spec("qwen35");
    s.matrix_type = QType::Q8_0;
    // The CPU chain rounds activations to Q8 for quantized weights; the device keeps them F32.
    check_decode_parity(s, 3e-2);
}

// With the GEMVs over x rounded to bytes the device rounds activations as the CPU chain does for
// Q8_0 weights, but 16 values a scale where the CPU chain takes 32 (gemv.comp), so each side
// carries its own rounding: the largest logit error over these 10 tokens is 0.085 (lavapipe),
// 0.037 when the device rounded 32 values a scale too, 0.105 with F32 activations.
TEST(VulkanDriver, Qwen35Q8DecodeOverBytes) {
    check_decode_parity(test::parity_spec("qwen35", QType::Q8_0), 3e-2, Kernels::GemvX::bytes);
}
TEST(VulkanDriver, LlamaQ4KDecodeOverBytes) {
    check_decode_parity(test::parity_spec("llama", QType::Q4_K), 3e-2, Kernels::GemvX::bytes);
}
// A Q4_K_M mix over bytes, where each DeltaNet layer's output projection applies the step's
// gated norm (Fusions::gated_norm_in_output), and with the step applying it. Its second and eighth
// tokens are near ties on the CPU chain (0.011 and 0.0005 apart), which the two take either way.
TEST(VulkanDriver, Qwen35Q4KMixDecodeOverBytes) {
    const TinySpec s = test::parity_spec("qwen35", QType::Q4_K);  // the mix (parity_spec)
    ASSERT_TRUE(s.q4_k_m);
    for (bool gated : {true, false}) {
        SCOPED_TRACE(gated ? "gated norm in the output projection" : "gated norm in the step");
        check_decode_parity(s, 3e-2, Kernels::GemvX::bytes, gated, true);
    }
}
// The same with the GEMVs' shapes balanced over a device of few workgroup slots
// (DriverOptions::gemv_slots): a GEMV alone in its stage takes fewer rows a group, and one of
// a mixer's input projections that shares its stage with a matrix of another type fills its
// part of the slots (Kernels::shared_shape), each workgroup then taking several row blocks.
TEST(VulkanDriver, Qwen35Q4KMixDecodeOverBytesOnFewSlots) {
    const TinySpec s = test::parity_spec("qwen35", QType::Q4_K);
    for (uint32_t slots : {3u, 16u}) {
        SCOPED_TRACE(std::to_string(slots) + " slots");
        check_decode_parity(s, 3e-2, Kernels::GemvX::bytes, true, true, slots);
    }
}

TEST(VulkanDriver, GreedyTokenAndPrefillAgreeWithDecode) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(test::parity_spec("qwen35"));
    DriverOptions o = test_options();
    o.plan.window = 0;  // prefill replays the token command, so its logits are decode's exactly
    auto drv = ResidentDriver::create(model, o);
    ASSERT_TRUE(drv.ok()) << drv.reason();
    ResidentDriver& d = **drv;
    ASSERT_EQ(d.plan().window, 0);
    const std::vector<int32_t> prompt = {5, 9, 2, 77, 31};
    auto a = d.new_session(32), b = d.new_session(32);
    std::vector<float> all, step;
    d.prefill(*a, prompt, LogitsRows::all, all);
    ASSERT_EQ(all.size(), prompt.size() * model->hp.n_vocab);
    for (size_t i = 0; i < prompt.size(); ++i) {
        d.decode(*b, prompt[i], step);
        for (size_t j = 0; j < step.size(); ++j) ASSERT_EQ(step[j], all[i * step.size() + j]);
    }
    // Greedy: the id computed on the device equals the host argmax of the logits.
    std::vector<float> lg;
    d.decode(*a, 11, lg);
    int32_t host = (int32_t)(std::max_element(lg.begin(), lg.end()) - lg.begin());
    int32_t dev_tok = d.decode_greedy(*b, 11);
    EXPECT_EQ(dev_tok, host);
    // Overflow and bad ids are errors, not crashes.
    auto c = d.new_session(2);
    d.decode(*c, 1, lg);
    d.decode(*c, 1, lg);
    EXPECT_THROW(d.decode(*c, 1, lg), Error);
    EXPECT_THROW(d.decode(*a, -1, lg), Error);
    EXPECT_THROW(d.decode(*a, (int32_t)model->hp.n_vocab, lg), Error);
}

// decode hands out the logits where the executor left them: a session's stay as they were while
// another session decodes, until its own next decode; they are the values its copying form
// returns for the same tokens; on the driver and the CPU chain alike.
TEST(VulkanDriver, DecodedLogitsStayTheSessionsOwnUntilItsNextDecode) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(test::parity_spec("qwen35"));
    auto drv = ResidentDriver::create(model, test_options());
    ASSERT_TRUE(drv.ok()) << drv.reason();
    cpu::Chain chain(model);
    for (Executor* ex : {static_cast<Executor*>(drv->get()), static_cast<Executor*>(&chain)}) {
        auto a = ex->new_session(16), b = ex->new_session(16);
        // The copying form over the same tokens, in sessions of their own.
        auto c = ex->new_session(16), d = ex->new_session(16);
        std::vector<float> copy_a, copy_b;
        ex->decode(*c, 5, copy_a);
        const std::span<const float> ra = ex->decode(*a, 5);
        ASSERT_EQ(ra.size(), (size_t)model->hp.n_vocab) << ex->name();
        ASSERT_TRUE(std::equal(ra.begin(), ra.end(), copy_a.begin())) << ex->name();
        const std::vector<float> before(ra.begin(), ra.end());
        const std::span<const float> rb = ex->decode(*b, 9);
        ex->decode(*d, 9, copy_b);
        ASSERT_TRUE(std::equal(rb.begin(), rb.end(), copy_b.begin())) << ex->name();
        ASSERT_FALSE(std::equal(rb.begin(), rb.end(), before.begin())) << ex->name();
        EXPECT_TRUE(std::equal(ra.begin(), ra.end(), before.begin()))
            << ex->name() << ": another session's decode overwrote a's logits";
        // a's next decode replaces them, where they were.
        const std::span<const float> ra2 = ex->decode(*a, 9);
        EXPECT_EQ(ra2.data(), ra.data()) << ex->name();
        EXPECT_FALSE(std::equal(ra2.begin(), ra2.end(), before.begin())) << ex->name();
    }
}

// --profile times every other token whole (no timestamp a stage) and the others stage by stage;
// both commands compute what the unprofiled driver's do.
TEST(VulkanDriver, ProfiledTokensAreTimedBothWaysAndComputeTheSame) {
    VK_TEST_DEVICE();
    if (!dev.features().timestamps) GTEST_SKIP() << "no timestamps";
    auto model = dl::test::tiny_model(test::parity_spec("qwen35"));
    DriverOptions o = test_options();
    o.profile = false;
    auto plain = ResidentDriver::create(model, o);
    o.profile = true;
    auto timed = ResidentDriver::create(model, o);
    ASSERT_TRUE(plain.ok() && timed.ok());
    ASSERT_EQ((*plain)->profile(), nullptr);
    auto a = (*plain)->new_session(32), b = (*timed)->new_session(32);
    std::vector<float> la, lb;
    for (int32_t t : {3, 14, 15, 9, 26, 5}) {
        (*plain)->decode(*a, t, la);
        (*timed)->decode(*b, t, lb);
        ASSERT_EQ(la, lb) << "token " << t;
    }
    for (int i = 0, ta = 7, tb = 7; i < 4; ++i) {
        ta = (*plain)->decode_greedy(*a, ta);
        tb = (*timed)->decode_greedy(*b, tb);
        ASSERT_EQ(ta, tb) << "greedy token " << i;
    }
    const Profile* p = (*timed)->profile();
    ASSERT_NE(p, nullptr);
    const Profile::Phase& d = p->phases.at("decode");
    EXPECT_EQ(d.tokens, 5);
    EXPECT_EQ(d.whole_tokens, 5);
    EXPECT_GT(d.whole_ms, 0);
    EXPECT_GT(d.ms.at("gemv ffn"), 0);
    EXPECT_GT(d.ms.at("head"), 0);
    EXPECT_EQ(d.ms.count(CommandList::kWhole), 0u);
    EXPECT_NE(p->report().find("timed whole"), std::string::npos) << p->report();
}

// 40 greedy tokens after a prompt prefilled in windows: the token chosen on the device (only its
// id returns) against the CPU chain's argmax, each fed its own choice. On F32 weights all 40
// must agree. On Q8_0 the CPU chain rounds activations to 8 bits, so the two may part where the
// CPU's top two logits are within that rounding (a near tie); past such a point the sequences
// legitimately differ and the comparison stops.
void check_greedy_40(const std::string& arch, QType type) {
    VK_TEST_DEVICE();
    TinySpec spec = test::parity_spec(arch);
    spec.matrix_type = type;
    auto model = dl::test::tiny_model(spec);
    DriverOptions o = test_options();
    o.plan.window = 8;
    auto drv = ResidentDriver::create(model, o);
    ASSERT_TRUE(drv.ok()) << drv.reason();
    ResidentDriver& d = **drv;
    cpu::Chain chain(model);
    const std::vector<int32_t> prompt = {2, 71, 18, 28, 18, 28, 45, 9, 4, 52, 35};
    auto sg = d.new_session(64);
    auto sc = chain.new_session(64);
    std::vector<float> lg, lc;
    d.prefill(*sg, prompt, LogitsRows::last, lg);
    chain.prefill(*sc, prompt, LogitsRows::last, lc);
    auto argmax = [](const std::vector<float>& v) {
        return (int32_t)(std::max_element(v.begin(), v.end()) - v.begin());
    };
    int32_t tok_dev = argmax(lg), tok_cpu = argmax(lc);
    const double near_tie = type == QType::F32 ? 0.0 : 3e-2;
    int agreed = 0;
    for (int i = 0; i < 40; ++i) {
        if (tok_dev != tok_cpu) {
            double scale = 0;
            for (float x : lc) scale = std::max(scale, std::fabs((double)x));
            const double gap = (double)lc[tok_cpu] - lc[tok_dev];
            ASSERT_LE(gap, near_tie * (1 + scale))
                << arch << " " << qtype_name(type) << ": token " << i << " device " << tok_dev
                << " cpu " << tok_cpu << " is not a near tie";
            break;
        }
        ++agreed;
        tok_dev = d.decode_greedy(*sg, tok_dev);
        chain.decode(*sc, tok_cpu, lc);
        tok_cpu = argmax(lc);
    }
    std::printf("[ greedy   ] %s %s: %d of 40 tokens agree\n", arch.c_str(),
                std::string(qtype_name(type)).c_str(), agreed);
    if (type == QType::F32) {
        EXPECT_EQ(agreed, 40);
    }
    EXPECT_GE(agreed, 10) << arch << " " << qtype_name(type);
}

TEST(VulkanDriver, Qwen35Greedy40MatchesCpuChain) {
    check_greedy_40("qwen35", QType::F32);
    check_greedy_40("qwen35", QType::Q8_0);
}
TEST(VulkanDriver, Qwen3Greedy40MatchesCpuChain) {
    check_greedy_40("qwen3", QType::F32);
    check_greedy_40("qwen3", QType::Q8_0);
}
TEST(VulkanDriver, LlamaGreedy40MatchesCpuChain) {
    check_greedy_40("llama", QType::F32);
    check_greedy_40("llama", QType::Q8_0);
}

// Prefix reuse: after a snapshot the session goes on elsewhere; restored (into itself or into
// a fresh session) it continues exactly as it would have, with windows and decode mixed.
void check_snapshot(const std::string& arch) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(test::parity_spec(arch));
    DriverOptions o = test_options();
    o.plan.window = 4;
    auto drv = ResidentDriver::create(model, o);
    ASSERT_TRUE(drv.ok()) << drv.reason();
    ResidentDriver& d = **drv;
    const std::vector<int32_t> prefix = {3, 14, 15, 9, 26, 5, 35, 8, 9};
    const std::vector<int32_t> next = {7, 9, 32}, other = {38, 4, 62, 6, 43};
    auto a = d.new_session(32);
    std::vector<float> lg, want, got;
    d.prefill(*a, prefix, LogitsRows::last, lg);
    auto snap = d.snapshot(*a);
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->n_past, (int64_t)prefix.size());
    for (int32_t t : next) {
        d.decode(*a, t, lg);
        want.insert(want.end(), lg.begin(), lg.end());
    }
    // Move the session on with other tokens (a window and decodes), then restore.
    d.prefill(*a, other, LogitsRows::last, lg);
    ASSERT_TRUE(d.restore(*a, *snap));
    EXPECT_EQ(a->n_past, (int64_t)prefix.size());
    for (int32_t t : next) {
        d.decode(*a, t, lg);
        got.insert(got.end(), lg.begin(), lg.end());
    }
    EXPECT_EQ(got, want) << arch << ": restored into the same session";
    auto b = d.new_session(32);
    d.prefill(*b, other, LogitsRows::last, lg);
    ASSERT_TRUE(d.restore(*b, *snap));
    got.clear();
    for (int32_t t : next) {
        d.decode(*b, t, lg);
        got.insert(got.end(), lg.begin(), lg.end());
    }
    EXPECT_EQ(got, want) << arch << ": restored into another session";
    // A session too small for the snapshot, and a snapshot of another driver, are errors.
    auto small = d.new_session(4);
    EXPECT_THROW(d.restore(*small, *snap), Error);
    auto drv2 = ResidentDriver::create(model, o);
    ASSERT_TRUE(drv2.ok());
    auto c = (*drv2)->new_session(32);
    EXPECT_THROW((*drv2)->restore(*c, *snap), Error);
}

TEST(VulkanDriver, Qwen35SnapshotRestoresThePrefix) {
    check_snapshot("qwen35");
}
TEST(VulkanDriver, LlamaSnapshotRestoresThePrefix) {
    check_snapshot("llama");
}

// llama-3 rope frequency divisors: the device rotates by the same angles as the CPU chain.
TEST(VulkanDriver, LlamaRopeFreqsDecodeMatchesCpuChain) {
    TinySpec s = test::parity_spec("llama");
    s.rope_freqs = true;
    check_decode_parity(s, 2e-3);
}

// The token command runs the decode attention with one query head a workgroup below
// DriverOptions::attn_short positions and in the launcher's form (two heads of a key/value head
// a workgroup here) from there: every token's logits against the CPU chain on both sides of the
// switch, over a context of several chunks of cache rows (several splits in each form).
void check_short_attention(const std::string& arch) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(test::parity_spec(arch));
    DriverOptions o = test_options();
    o.plan.n_ctx = 256;
    o.attn_short = 70;
    auto drv = ResidentDriver::create(model, o);
    ASSERT_TRUE(drv.ok()) << drv.reason();
    ResidentDriver& d = **drv;
    cpu::Chain chain(model);
    auto sg = d.new_session(256);
    auto sc = chain.new_session(256);
    ASSERT_EQ(d.short_attention_until(*sg), 70);
    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> pick(0, (int32_t)model->hp.n_vocab - 1);
    std::vector<float> lg, lc;
    for (int i = 0; i < 140; ++i) {
        const int32_t t = pick(rng);
        d.decode(*sg, t, lg);
        chain.decode(*sc, t, lc);
        ASSERT_EQ(lg.size(), lc.size());
        double worst = 0, scale = 0;
        for (size_t j = 0; j < lg.size(); ++j) {
            ASSERT_TRUE(std::isfinite(lg[j])) << arch << " token " << i << " logit " << j;
            worst = std::max(worst, std::fabs((double)lg[j] - lc[j]));
            scale = std::max(scale, std::fabs((double)lc[j]));
        }
        ASSERT_LE(worst, 2e-3 * (1 + scale)) << arch << " token " << i;
    }
    // The rule's own choice: the whole of this small context (the extra cache reads of a tiny
    // model stay far under the bound), and none where switched off.
    DriverOptions rule = test_options();
    auto d2 = ResidentDriver::create(model, rule);
    ASSERT_TRUE(d2.ok()) << d2.reason();
    EXPECT_EQ((*d2)->short_attention_until(*(*d2)->new_session(100)), 100);
    rule.attn_short = 0;
    auto d3 = ResidentDriver::create(model, rule);
    ASSERT_TRUE(d3.ok()) << d3.reason();
    EXPECT_EQ((*d3)->short_attention_until(*(*d3)->new_session(100)), 0);
}

TEST(VulkanDriver, Qwen35ShortContextAttentionMatchesCpuChain) {
    check_short_attention("qwen35");
}
TEST(VulkanDriver, Qwen3ShortContextAttentionMatchesCpuChain) {
    check_short_attention("qwen3");
}

// bench's decode floor: a positive, finite rate, and the weights it read named in the report;
// decoding afterwards is unchanged (the probe only reads).
TEST(VulkanDriver, MeasuresTheRateItReadsItsWeightsAt) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(test::parity_spec("qwen35"));
    auto drv = ResidentDriver::create(model, test_options());
    ASSERT_TRUE(drv.ok()) << drv.reason();
    auto s0 = (*drv)->new_session(16);
    std::vector<float> before, after;
    (*drv)->decode(*s0, 5, before);
    const Executor::ReadRate r = (*drv)->measure_read_rate();
    EXPECT_GT(r.gbps, 0.0);
    EXPECT_TRUE(std::isfinite(r.gbps));
    EXPECT_NE(r.what.find("MiB"), std::string::npos) << r.what;
    auto s1 = (*drv)->new_session(16);
    (*drv)->decode(*s1, 5, after);
    EXPECT_EQ(before, after);
}

TEST(VulkanDriver, DeclinesWithASentence) {
    VK_TEST_DEVICE();
    TinySpec s = test::parity_spec("llama");
    s.matrix_type = QType::Q4_1;  // no device kernel reads Q4_1 blocks
    auto r = ResidentDriver::create(dl::test::tiny_model(s), test_options());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.reason().find("has no device kernel"), std::string::npos) << r.reason();
    EXPECT_NE(r.reason().find("q4_1"), std::string::npos) << r.reason();
    // More experts a token than the device's router takes: a sentence, not a wrong answer.
    TinySpec moe = test::parity_spec("qwen3");
    moe.arch = "qwen3moe";
    moe.n_expert = 12;
    moe.n_expert_used = 9;
    auto m = ResidentDriver::create(dl::test::tiny_model(moe), test_options());
    ASSERT_FALSE(m.ok());
    EXPECT_NE(m.reason().find("9 experts a token"), std::string::npos) << m.reason();
}

// Mixture-of-experts layers (the router's choice and the experts on the device, token by
// token) against the CPU chain: qwen3moe; qwen35moe with H_v != H_k, its shared expert and gate
// and up in one stack; every expert of a token in the choice (k = n_expert); in F32, Q8_0 and a
// Q4_K_M mix.
using test::moe_spec;
TEST(VulkanDriver, Qwen3MoeDecodeMatchesCpuChain) {
    check_decode_parity(moe_spec("qwen3moe"), 2e-4);
}
TEST(VulkanDriver, Qwen35MoeDecodeMatchesCpuChain) {
    check_decode_parity(moe_spec("qwen35moe"), 2e-4);
}
TEST(VulkanDriver, Qwen35MoeEveryExpertChosen) {
    TinySpec s = moe_spec("qwen35moe");
    s.n_expert = s.n_expert_used = 4;
    check_decode_parity(s, 2e-4);
}
TEST(VulkanDriver, Qwen3MoeQ8DecodeStaysClose) {
    TinySpec s = moe_spec("qwen3moe", QType::Q8_0);
    s.n_expert = 9;
    s.n_expert_used = 8;
    check_decode_parity(s, 3e-2, Kernels::GemvX::automatic, true, true);
}
TEST(VulkanDriver, Qwen35MoeQ4KMixDecodeStaysClose) {
    check_decode_parity(moe_spec("qwen35moe", QType::Q4_K), 3e-2, Kernels::GemvX::automatic, true,
                        true);
}

// The tuning variables' defaults (the environment table) are the kernels' own defaults, which
// the tests and the speed reports run with.
TEST(VulkanDriverOptions, DefaultsAgreeWithTheKernels) {
    VK_TEST_DEVICE();
    const char* vars[] = {"DELTALLM_VK_GEMV_X",     "DELTALLM_VK_GEMV_GROUPS",
                          "DELTALLM_VK_GEMV_WAVES", "DELTALLM_VK_GEMV_WIDE",
                          "DELTALLM_VK_DN_COLUMNS", "DELTALLM_VK_DN_SCAN",
                          "DELTALLM_VK_GEMM_TILE",  "DELTALLM_VK_GEMV_BALANCE"};
    std::vector<std::pair<std::string, std::string>> saved;
    for (const char* v : vars)
        if (const char* was = std::getenv(v)) saved.emplace_back(v, was);
    for (const char* v : vars) unsetenv(v);
    DriverOptions o;
    for (const auto& [v, was] : saved) setenv(v.c_str(), was.c_str(), 1);
    const Kernels fresh(dev, *test::env().pipes);
    EXPECT_EQ(o.tuning.gemv_x, fresh.tuning.gemv_x);
    EXPECT_EQ(o.tuning.gemv_groups, fresh.tuning.gemv_groups);
    EXPECT_EQ(o.tuning.gemv_waves, fresh.tuning.gemv_waves);
    EXPECT_EQ(o.tuning.gemv_wide, fresh.tuning.gemv_wide);
    EXPECT_EQ(o.tuning.gemv_balance, fresh.tuning.gemv_balance);
    EXPECT_EQ(o.tuning.gemv_slots, fresh.tuning.gemv_slots);
    EXPECT_EQ(o.tuning.deltanet_columns, fresh.tuning.deltanet_columns);
    EXPECT_EQ(o.tuning.deltanet_scan, fresh.tuning.deltanet_scan);
    EXPECT_EQ(o.tuning.gemm_tile.bm, fresh.tuning.gemm_tile.bm);
    EXPECT_EQ(o.tuning.gemm_tile.bn, fresh.tuning.gemm_tile.bn);
    EXPECT_EQ(o.tuning.gemm_tile.bk, fresh.tuning.gemm_tile.bk);
    EXPECT_EQ(o.tuning.gemm_tile.wg, fresh.tuning.gemm_tile.wg);
}

// The tuning variables of the driver: values it can use parse, anything else is one clear error.
TEST(VulkanDriverOptions, TuningVariablesParseOrRefuse) {
    struct Unset {
        ~Unset() {
            unsetenv("DELTALLM_VK_GEMM_TILE");
            unsetenv("DELTALLM_VK_GEMV_GROUPS");
            unsetenv("DELTALLM_VK_GEMV_WAVES");
            unsetenv("DELTALLM_VK_GEMV_WIDE");
            unsetenv("DELTALLM_VK_GEMV_X");
            unsetenv("DELTALLM_VK_DN_COLUMNS");
            unsetenv("DELTALLM_VK_DN_SCAN");
            unsetenv("DELTALLM_VK_ATTN_SHORT");
        }
    } unset;
    setenv("DELTALLM_VK_GEMM_TILE", "64x128x32", 1);
    const Kernels::GemmTile t = DriverOptions::gemm_tile_from_env();
    EXPECT_EQ(t.bm, 64u);
    EXPECT_EQ(t.bn, 128u);
    EXPECT_EQ(t.bk, 32u);
    EXPECT_EQ(t.wg, 256u);  // the default workgroup
    setenv("DELTALLM_VK_GEMM_TILE", "128x256x32x512", 1);
    const Kernels::GemmTile t2 = DriverOptions::gemm_tile_from_env();
    EXPECT_EQ(t2.bn, 256u);
    EXPECT_EQ(t2.wg, 512u);
    setenv("DELTALLM_VK_GEMM_TILE", "", 1);
    EXPECT_EQ(DriverOptions::gemm_tile_from_env().bm, 0u);  // chosen by the rows
    for (const char* bad : {"64x128", "64x128x48", "64x128x64x", "0x128x64", "512x128x64", "big",
                            "64x128x64x64", "64x128x64x384", "64x128x64x256x"}) {
        setenv("DELTALLM_VK_GEMM_TILE", bad, 1);
        EXPECT_THROW(DriverOptions::gemm_tile_from_env(), Error) << bad;
    }
    setenv("DELTALLM_VK_GEMV_GROUPS", "8", 1);
    EXPECT_EQ(DriverOptions::gemv_groups_from_env(), 8u);
    for (const char* bad : {"0", "3", "16", "-1"}) {
        setenv("DELTALLM_VK_GEMV_GROUPS", bad, 1);
        EXPECT_THROW(DriverOptions::gemv_groups_from_env(), Error) << bad;
    }
    setenv("DELTALLM_VK_ATTN_SHORT", "-1", 1);
    EXPECT_EQ(DriverOptions::attn_short_from_env(), -1);
    setenv("DELTALLM_VK_ATTN_SHORT", "4096", 1);
    EXPECT_EQ(DriverOptions::attn_short_from_env(), 4096);
    for (const char* bad : {"-2", "many"}) {
        setenv("DELTALLM_VK_ATTN_SHORT", bad, 1);
        EXPECT_THROW(DriverOptions::attn_short_from_env(), Error) << bad;
    }
    setenv("DELTALLM_VK_GEMV_WAVES", "0", 1);
    EXPECT_EQ(DriverOptions::gemv_waves_from_env(), 0u);
    for (const char* bad : {"-1", "65", "two"}) {
        setenv("DELTALLM_VK_GEMV_WAVES", bad, 1);
        EXPECT_THROW(DriverOptions::gemv_waves_from_env(), Error) << bad;
    }
    using W = Kernels::GemvWide;
    for (auto [name, want] : {std::pair{"auto", W::automatic}, {"off", W::off}, {"all", W::all}}) {
        setenv("DELTALLM_VK_GEMV_WIDE", name, 1);
        EXPECT_EQ(DriverOptions::gemv_wide_from_env(), want) << name;
    }
    for (const char* bad : {"1", "on", ""}) {
        setenv("DELTALLM_VK_GEMV_WIDE", bad, 1);
        EXPECT_THROW(DriverOptions::gemv_wide_from_env(), Error) << bad;
    }
    setenv("DELTALLM_VK_DN_COLUMNS", "0", 1);
    EXPECT_EQ(DriverOptions::deltanet_columns_from_env(), 0u);
    setenv("DELTALLM_VK_DN_COLUMNS", "-4", 1);
    EXPECT_THROW(DriverOptions::deltanet_columns_from_env(), Error);
    using S = Kernels::DeltaNetScan;
    for (auto [name, want] : {std::pair{"best", S::best},
                              {"chunked", S::chunked},
                              {"shuffle", S::shuffle},
                              {"clustered", S::clustered},
                              {"plain", S::plain}}) {
        setenv("DELTALLM_VK_DN_SCAN", name, 1);
        EXPECT_EQ(DriverOptions::deltanet_scan_from_env(), want) << name;
    }
    for (const char* bad : {"", "token", "Chunked", "wy"}) {
        setenv("DELTALLM_VK_DN_SCAN", bad, 1);
        EXPECT_THROW(DriverOptions::deltanet_scan_from_env(), Error) << bad;
    }
    using X = Kernels::GemvX;
    for (auto [name, want] :
         {std::pair{"auto", X::automatic}, {"global", X::global}, {"bytes", X::bytes}}) {
        setenv("DELTALLM_VK_GEMV_X", name, 1);
        EXPECT_EQ(DriverOptions::gemv_x_from_env(), want) << name;
    }
    // The refusal names the variable, the value and every choice.
    setenv("DELTALLM_VK_GEMV_X", "int8", 1);
    try {
        DriverOptions::gemv_x_from_env();
        ADD_FAILURE() << "int8 accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("DELTALLM_VK_GEMV_X='int8': use one of auto, global, "
                                             "bytes"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace dl::vk
