// Mixture-of-experts models (qwen35moe with its shared expert, qwen3moe, the fused gate/up stack)
// on the CPU chain against the double-precision reference forward, prefill against decode,
// batched steps against solo runs, quantized weights against f32, and the load errors of a file
// whose experts are missing or inconsistent.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "cpu/chain.h"
#include "cpu/reference_forward.h"
#include "model/forward_pass.h"
#include "model/tiny_model.h"

namespace dl {
namespace {

using cpu::Chain;
using test::TinySpec;

template <typename B>
double rel_err(const float* a, const B* b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double d = double(a[i]) - double(b[i]);
        num += d * d;
        den += double(b[i]) * double(b[i]);
    }
    return std::sqrt(num / den);
}

// qwen35moe: 8 layers (attention at 3 and 7), H_v != H_k, 8 experts with 2 used, a shared
// expert; qwen3moe: 2 layers, no shared expert.
TinySpec moe_spec(const std::string& arch, bool fused = false) {
    TinySpec s;
    s.arch = arch;
    s.fused_gate_up = fused;
    if (arch == "qwen35moe") {
        s.n_layer = 8;
        s.n_ff_shexp = 48;
    } else {
        s.n_layer = 2;
        s.rope_dims = s.head_dim;
    }
    s.residual_gain = 0.5;
    return s;
}

struct Case {
    const char* arch;
    bool fused;
};

void PrintTo(const Case& c, std::ostream* os) {
    *os << c.arch << (c.fused ? " fused" : "");
}

class MoeChain : public ::testing::TestWithParam<Case> {};

TEST_P(MoeChain, LoadsAsExpertsAndMatchesTheReference) {
    const Case c = GetParam();
    auto model = test::tiny_model(moe_spec(c.arch, c.fused));
    const Hparams& hp = model->hp;
    ASSERT_EQ(hp.ffn_kind, FfnKind::experts);
    EXPECT_EQ(hp.n_expert, 8);
    EXPECT_EQ(hp.n_expert_used, 2);
    EXPECT_EQ(model->layers[0].ffn_gate_up_exps != nullptr, c.fused);
    const std::string steps = ForwardPass::build(*model).describe();
    EXPECT_NE(steps.find("moe_experts"), std::string::npos);
    EXPECT_EQ(steps.find("shared_expert_gate") != std::string::npos,
              std::string(c.arch) == "qwen35moe");

    cpu::ChainOptions opt;
    opt.f32_kv_cache = true;  // so that what remains is float rounding
    Chain chain(model, opt);
    const int64_t V = hp.n_vocab, n = 24;
    const auto toks = test::tiny_tokens(n, V);
    auto s = chain.new_session(64);
    std::vector<float> all;
    chain.prefill(*s, toks, LogitsRows::all, all);
    const auto ref = test::reference_forward(*model, toks);
    double worst = 0;
    for (int64_t t = 0; t < n; ++t) {
        for (int64_t i = 0; i < V; ++i) ASSERT_TRUE(std::isfinite(all[t * V + i]));
        worst = std::max(worst, rel_err(all.data() + t * V, ref[t].data(), V));
    }
    // Float rounding as in the dense models (measured 2e-7..1e-5 there); a near-tie in a
    // router would show as a far larger error.
    EXPECT_LT(worst, 2e-5);

    // Token by token (one row per pass, the DeltaNet step form) gives the same logits.
    auto d = chain.new_session(64);
    std::vector<float> row;
    for (int64_t t = 0; t < n; ++t) {
        chain.decode(*d, toks[t], row);
        EXPECT_LT(rel_err(row.data(), all.data() + t * V, V), 1e-4) << "token " << t;
    }
}

// Rows of different sequences in one pass choose different experts: each row's result is still
// exactly what it is alone.
TEST_P(MoeChain, BatchedDecodesAreBitForBitTheSoloDecodes) {
    const Case c = GetParam();
    auto model = test::tiny_model(moe_spec(c.arch, c.fused));
    Chain chain(model);
    const int64_t V = model->hp.n_vocab;
    std::vector<std::unique_ptr<SessionState>> batch, alone;
    std::vector<std::vector<int32_t>> toks;
    std::vector<float> ignored;
    for (uint32_t i = 0; i < 5; ++i) {
        toks.push_back(test::tiny_tokens(6 + i * 3, V, 40 + i));
        std::span<const int32_t> h(toks[i].data(), toks[i].size() - 1);
        batch.push_back(chain.new_session(64));
        alone.push_back(chain.new_session(64));
        chain.prefill(*batch[i], h, LogitsRows::last, ignored);
        chain.prefill(*alone[i], h, LogitsRows::last, ignored);
    }
    std::vector<StepItem> items(5);
    for (size_t i = 0; i < 5; ++i) {
        items[i].session = batch[i].get();
        items[i].tokens = std::span<const int32_t>(&toks[i].back(), 1);
    }
    chain.step(items);
    for (size_t i = 0; i < 5; ++i) {
        std::vector<float> want;
        chain.decode(*alone[i], toks[i].back(), want);
        ASSERT_EQ(items[i].logits.size(), (size_t)V);
        EXPECT_TRUE(std::equal(want.begin(), want.end(), items[i].logits.begin())) << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Models, MoeChain,
                         ::testing::Values(Case{"qwen35moe", false}, Case{"qwen3moe", false},
                                           Case{"qwen35moe", true}),
                         [](const auto& info) {
                             return std::string(info.param.arch) +
                                    (info.param.fused ? "_fused" : "");
                         });

TEST(MoeChain, QuantizedExpertsStayCloseToF32) {
    TinySpec spec = moe_spec("qwen3moe");
    auto base = test::tiny_model(spec);
    spec.matrix_type = QType::Q8_0;
    auto q8 = test::tiny_model(spec);
    Chain a(base), b(q8);
    const int64_t V = base->hp.n_vocab;
    const auto toks = test::tiny_tokens(16, V, 9);
    std::vector<float> la, lb;
    auto sa = a.new_session(32), sb = b.new_session(32);
    a.prefill(*sa, toks, LogitsRows::all, la);
    b.prefill(*sb, toks, LogitsRows::all, lb);
    double worst = 0;
    for (int64_t t = 0; t < 16; ++t)
        worst = std::max(worst, rel_err(lb.data() + t * V, la.data() + t * V, V));
    EXPECT_LT(worst, 0.06);
    EXPECT_GT(worst, 0.0);  // the quantized file really is another one
}

TEST(MoeLoad, MissingOrInconsistentExpertsAreOneSentence) {
    auto expect_error = [](TinySpec s, const std::string& part) {
        try {
            test::tiny_model(s);
            ADD_FAILURE() << "loaded: " << part;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
        }
    };
    TinySpec s = moe_spec("qwen35moe");
    s.drop_tensor = "blk.1.ffn_down_exps.weight";
    expect_error(s, "ffn_down_exps");
    s = moe_spec("qwen35moe");
    s.drop_tensor = "blk.0.ffn_gate_inp_shexp.weight";
    expect_error(s, "ffn_gate_inp_shexp");
    s = moe_spec("qwen3moe");
    s.widen_tensor = "blk.0.ffn_gate_inp.weight";
    expect_error(s, "ffn_gate_inp");
    s = moe_spec("qwen3moe");
    s.n_expert_used = 9;
    expect_error(s, "experts");
}

}  // namespace
}  // namespace dl
