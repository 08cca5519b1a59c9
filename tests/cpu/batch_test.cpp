// Batched steps of the CPU chain against solo runs of the same sequences: decodes of sequences at
// different positions in one step, prompt chunks beside decodes, chunks that cross the window,
// sequences joining and leaving between steps, and the errors that must leave every session as it
// was. The solo runs use prefill and decode, which are one-item steps, so the tests also hold the
// rows of a pass independent of the other rows in it.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "cpu/chain.h"
#include "cpu/forward.h"
#include "model/tiny_model.h"

namespace dl {
namespace {

using cpu::Chain;
using cpu::ChainOptions;
using test::TinySpec;
using Want = StepItem::Want;

double rel_err(std::span<const float> a, std::span<const float> b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double d = double(a[i]) - double(b[i]);
        num += d * d;
        den += double(b[i]) * double(b[i]);
    }
    return std::sqrt(num / den);
}

TinySpec spec_for(const std::string& arch, QType type) {
    TinySpec s;
    s.arch = arch;
    s.matrix_type = type;
    if (arch != "qwen35") {
        s.n_layer = 2;
        s.rope_dims = s.head_dim;
    }
    if (arch == "llama") s.rope_freqs = true;
    return s;
}

// What one sequence does: a history prefilled alone, then in the batch either a prompt chunk or a
// decode token.
struct Plan {
    int64_t history;  // tokens before the batched step (0: none)
    int64_t chunk;    // tokens it brings to the step (1: a decode)
    Want want;
};

// Solo: the history, then the chunk, each through prefill (or decode for one token after a
// history); returns the chunk's logits as the step would give them.
std::vector<float> solo(Chain& chain, const std::vector<int32_t>& toks, const Plan& p,
                        int64_t n_ctx) {
    auto s = chain.new_session(n_ctx);
    std::vector<float> logits;
    std::span<const int32_t> all(toks);
    if (p.history > 0) chain.prefill(*s, all.first((size_t)p.history), LogitsRows::last, logits);
    std::span<const int32_t> chunk = all.subspan((size_t)p.history, (size_t)p.chunk);
    if (p.chunk == 1 && p.history > 0 && p.want != Want::all_logits) {
        chain.decode(*s, chunk[0], logits);
        return logits;
    }
    chain.prefill(*s, chunk, p.want == Want::all_logits ? LogitsRows::all : LogitsRows::last,
                  logits);
    return logits;
}

struct Case {
    const char* arch;
    QType type;
    double bar;  // relative L2 error allowed between batched and solo logits
};

void PrintTo(const Case& c, std::ostream* os) {
    *os << c.arch << " " << qtype_name(c.type);
}

class BatchedStep : public ::testing::TestWithParam<Case> {};

// Sequences at different positions and lengths, decodes and prompt chunks (one longer than the
// window, so it continues in a second pass beside other sequences' rows) in one step: each
// sequence's logits equal its solo run's. Rows never mix, so in F32 the only differences are the
// DeltaNet's chunk boundaries, which move when a sequence's rows are split differently.
TEST_P(BatchedStep, EachSequenceEqualsItsSoloRun) {
    const Case c = GetParam();
    auto model = test::tiny_model(spec_for(c.arch, c.type));
    ChainOptions o;
    o.window = 32;
    o.deltanet_chunk = 8;
    Chain chain(model, o);
    const int64_t V = model->hp.n_vocab, n_ctx = 128;
    const std::vector<Plan> plans = {
        {5, 1, Want::last_logits},   // decodes at different positions
        {40, 1, Want::last_logits},  //
        {0, 3, Want::last_logits},   // a short new prompt
        {9, 45, Want::all_logits},   // a chunk over the window, every row
        {0, 1, Want::last_logits},   // a one-token prompt
        {17, 6, Want::nothing},      // a chunk whose logits nobody wants
        {1, 1, Want::all_logits},    //
    };
    std::vector<std::vector<int32_t>> toks;
    std::vector<std::unique_ptr<SessionState>> sessions;
    std::vector<StepItem> items;
    for (size_t i = 0; i < plans.size(); ++i) {
        toks.push_back(test::tiny_tokens(plans[i].history + plans[i].chunk, V, 11 + (uint32_t)i));
        sessions.push_back(chain.new_session(n_ctx));
        std::vector<float> ignored;
        if (plans[i].history > 0)
            chain.prefill(*sessions[i],
                          std::span<const int32_t>(toks[i]).first((size_t)plans[i].history),
                          LogitsRows::last, ignored);
    }
    for (size_t i = 0; i < plans.size(); ++i) {
        StepItem it;
        it.session = sessions[i].get();
        it.tokens = std::span<const int32_t>(toks[i]).subspan((size_t)plans[i].history);
        it.want = plans[i].want;
        items.push_back(it);
    }
    chain.step(items);
    for (size_t i = 0; i < plans.size(); ++i) {
        SCOPED_TRACE(::testing::Message() << "sequence " << i);
        EXPECT_EQ(sessions[i]->n_past, plans[i].history + plans[i].chunk);
        const std::vector<float> want = solo(chain, toks[i], plans[i], n_ctx);
        if (plans[i].want == Want::nothing) {
            EXPECT_TRUE(items[i].logits.empty());
            continue;
        }
        ASSERT_EQ(items[i].logits.size(), want.size());
        for (size_t r = 0; r * V < want.size(); ++r) {
            std::span<const float> a = items[i].logits.subspan(r * V, V);
            std::span<const float> b = std::span<const float>(want).subspan(r * V, V);
            for (float x : a) ASSERT_TRUE(std::isfinite(x));
            EXPECT_LE(rel_err(a, b), c.bar) << "row " << r;
        }
    }
}

// Decodes only: every sequence's rows are computed exactly as alone (the same code on the same
// numbers), so the logits are bit for bit the solo decode's.
TEST_P(BatchedStep, DecodesAreBitForBitTheSoloDecodes) {
    const Case c = GetParam();
    auto model = test::tiny_model(spec_for(c.arch, c.type));
    Chain chain(model);
    const int64_t V = model->hp.n_vocab;
    const std::vector<int64_t> history = {1, 7, 30, 2, 64, 13};
    std::vector<std::vector<int32_t>> toks;
    std::vector<std::unique_ptr<SessionState>> batch, alone;
    std::vector<float> ignored;
    for (size_t i = 0; i < history.size(); ++i) {
        toks.push_back(test::tiny_tokens(history[i] + 3, V, 100 + (uint32_t)i));
        std::span<const int32_t> h = std::span<const int32_t>(toks[i]).first((size_t)history[i]);
        batch.push_back(chain.new_session(96));
        alone.push_back(chain.new_session(96));
        chain.prefill(*batch[i], h, LogitsRows::last, ignored);
        chain.prefill(*alone[i], h, LogitsRows::last, ignored);
    }
    for (int64_t k = 0; k < 3; ++k) {  // three steps in a row
        std::vector<StepItem> items(history.size());
        for (size_t i = 0; i < history.size(); ++i) {
            items[i].session = batch[i].get();
            items[i].tokens =
                std::span<const int32_t>(toks[i]).subspan((size_t)(history[i] + k), 1);
        }
        chain.step(items);
        for (size_t i = 0; i < history.size(); ++i) {
            std::vector<float> want;
            chain.decode(*alone[i], toks[i][(size_t)(history[i] + k)], want);
            ASSERT_EQ(items[i].logits.size(), (size_t)V);
            EXPECT_TRUE(std::equal(want.begin(), want.end(), items[i].logits.begin()))
                << "sequence " << i << " step " << k;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Models, BatchedStep,
    ::testing::Values(Case{"qwen35", QType::F32, 2e-5}, Case{"qwen3", QType::F32, 2e-5},
                      Case{"llama", QType::F32, 2e-5}, Case{"qwen35", QType::Q8_0, 2e-5},
                      Case{"qwen3", QType::Q8_0, 2e-5}),
    [](const auto& info) {
        return std::string(info.param.arch) + "_" + std::string(qtype_name(info.param.type));
    });

// Sequences join and leave between steps: A and B decode, then B and C (C's prompt beside B's
// decode), then A again after sitting out; every logit row equals the solo run of that sequence.
TEST(BatchedSteps, SequencesJoinAndLeaveBetweenSteps) {
    auto model = test::tiny_model(spec_for("qwen35", QType::F32));
    Chain chain(model);
    const int64_t V = model->hp.n_vocab;
    const auto ta = test::tiny_tokens(12, V, 1), tb = test::tiny_tokens(12, V, 2),
               tc = test::tiny_tokens(12, V, 3);
    auto a = chain.new_session(64), b = chain.new_session(64), c = chain.new_session(64);
    std::vector<float> ignored;
    chain.prefill(*a, std::span(ta).first(4), LogitsRows::last, ignored);
    chain.prefill(*b, std::span(tb).first(6), LogitsRows::last, ignored);
    auto item = [](SessionState* s, std::span<const int32_t> t) {
        StepItem it;
        it.session = s;
        it.tokens = t;
        return it;
    };
    std::vector<StepItem> s1 = {item(a.get(), std::span(ta).subspan(4, 1)),
                                item(b.get(), std::span(tb).subspan(6, 1))};
    chain.step(s1);
    std::vector<float> a1(s1[0].logits.begin(), s1[0].logits.end());
    std::vector<StepItem> s2 = {item(b.get(), std::span(tb).subspan(7, 1)),
                                item(c.get(), std::span(tc).first(5))};
    chain.step(s2);
    std::vector<float> b2(s2[0].logits.begin(), s2[0].logits.end());
    std::vector<float> c2(s2[1].logits.begin(), s2[1].logits.end());
    std::vector<StepItem> s3 = {item(a.get(), std::span(ta).subspan(5, 1))};
    chain.step(s3);
    std::vector<float> a3(s3[0].logits.begin(), s3[0].logits.end());

    auto solo_last = [&](const std::vector<int32_t>& t, int64_t prefix, int64_t n) {
        auto s = chain.new_session(64);
        std::vector<float> l;
        chain.prefill(*s, std::span(t).first((size_t)prefix), LogitsRows::last, l);
        for (int64_t i = 0; i < n; ++i) chain.decode(*s, t[(size_t)(prefix + i)], l);
        return l;
    };
    EXPECT_EQ(a1, solo_last(ta, 4, 1));
    EXPECT_EQ(b2, solo_last(tb, 6, 2));
    EXPECT_EQ(a3, solo_last(ta, 4, 2));
    auto sc = chain.new_session(64);
    std::vector<float> want_c;
    chain.prefill(*sc, std::span(tc).first(5), LogitsRows::last, want_c);
    EXPECT_EQ(c2, want_c);
}

StepItem item_of(SessionState* s, std::span<const int32_t> t) {
    StepItem it;
    it.session = s;
    it.tokens = t;
    return it;
}

// A bad item fails the whole step before anything runs: every session keeps its tokens.
TEST(BatchedSteps, ABadItemLeavesEverySessionAsItWas) {
    auto model = test::tiny_model(spec_for("qwen35", QType::F32));
    Chain chain(model);
    const int64_t V = model->hp.n_vocab;
    const auto t = test::tiny_tokens(10, V, 5);
    auto a = chain.new_session(8), b = chain.new_session(8);
    std::vector<float> before, after;
    chain.prefill(*a, std::span(t).first(3), LogitsRows::last, before);
    const int32_t bad = (int32_t)V;
    auto run = [&](std::vector<StepItem> items) {
        EXPECT_THROW(chain.step(items), Error);
        EXPECT_EQ(a->n_past, 3);
        EXPECT_EQ(b->n_past, 0);
    };
    StepItem ok = item_of(a.get(), std::span(t).subspan(3, 1));
    run({ok, item_of(b.get(), std::span(&bad, 1))});          // outside the vocabulary
    run({ok, item_of(b.get(), std::span(t).first(9))});       // over b's context
    run({ok, item_of(a.get(), std::span(t).subspan(4, 1))});  // a session twice
    run({ok, item_of(b.get(), std::span<const int32_t>())});  // no tokens
    run({ok, item_of(nullptr, std::span(t).first(1))});       // no session
    // The sessions still continue exactly: a's next decode equals a fresh run's.
    chain.decode(*a, t[3], after);
    auto fresh = chain.new_session(8);
    std::vector<float> want;
    chain.prefill(*fresh, std::span(t).first(4), LogitsRows::last, want);
    EXPECT_LE(rel_err(after, want), 1e-5);
}

// A session holds KV rows only for the tokens it has (growing by doubling, never past its
// context), so many sessions of a long context cost what their tokens need.
TEST(ChainKv, RowsAreAllocatedAsTheSequenceGrows) {
    TinySpec spec;
    spec.arch = "qwen3";
    spec.n_layer = 2;
    spec.rope_dims = spec.head_dim;
    auto model = test::tiny_model(spec);
    Chain chain(model);
    const int64_t V = model->hp.n_vocab, kvw = model->hp.n_head_kv * model->hp.head_dim;
    auto s = chain.new_session(100000);
    auto& cs = dynamic_cast<cpu::ChainSession&>(*s);
    ASSERT_FALSE(cs.k16.empty());
    EXPECT_EQ(cs.k16[0].size(), 0u);
    std::vector<float> logits;
    chain.prefill(*s, test::tiny_tokens(300, V, 1), LogitsRows::last, logits);
    EXPECT_GE(cs.k16[0].size(), (size_t)(300 * kvw));
    EXPECT_LE(cs.k16[0].size(), (size_t)(600 * kvw));
    // Restoring a longer snapshot into a fresh session grows it first; decoding continues exactly.
    auto snap = chain.snapshot(*s);
    auto t = chain.new_session(100000);
    ASSERT_TRUE(chain.restore(*t, *snap));
    std::vector<float> a, b;
    chain.decode(*s, 5, a);
    chain.decode(*t, 5, b);
    EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace dl
