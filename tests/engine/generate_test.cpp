// The generate loop over a scripted executor (whose logits make greedy decoding count upwards),
// and over the CPU chain with a tiny synthetic model, where every greedy token must be the argmax
// of a fresh prefill of the whole sequence.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "engine/tiny_image.h"

using namespace dl;

namespace {

// A model-free executor: after token t the logits peak at (t + 1) % V, so greedy output counts.
// It records every call so tests can check what the loop fed it.
class CountingExecutor : public Executor {
  public:
    explicit CountingExecutor(int64_t n_vocab) : n_vocab_(n_vocab) { model_.hp.n_vocab = n_vocab; }
    std::string name() const override { return "counting"; }
    const Model& model() const override { return model_; }
    std::unique_ptr<SessionState> new_session(int64_t n_ctx) override {
        auto s = std::make_unique<SessionState>();
        s->n_ctx = n_ctx;
        return s;
    }
    void prefill(SessionState& s, std::span<const int32_t> tokens, LogitsRows rows,
                 std::vector<float>& logits) override {
        if (s.n_past + (int64_t)tokens.size() > s.n_ctx) fail("overflow");
        prefills.push_back({tokens.begin(), tokens.end()});
        logits.clear();
        for (size_t i = 0; i < tokens.size(); ++i)
            if (rows == LogitsRows::all || i + 1 == tokens.size()) append_row(logits, tokens[i]);
        s.n_past += (int64_t)tokens.size();
    }
    std::span<const float> decode(SessionState& s, int32_t token) override {
        if (s.n_past + 1 > s.n_ctx) fail("overflow");
        decoded.push_back(token);
        last_.clear();
        append_row(last_, token);
        s.n_past += 1;
        return last_;
    }

    std::vector<std::vector<int32_t>> prefills;
    std::vector<int32_t> decoded;

  private:
    void append_row(std::vector<float>& logits, int32_t after) {
        size_t base = logits.size();
        logits.resize(base + n_vocab_, 0.0f);
        logits[base + (after + 1) % n_vocab_] = 10.0f;
    }
    int64_t n_vocab_;
    Model model_;
    std::vector<float> last_;  // the last decoded token's logits
};

SamplerParams greedy() {
    SamplerParams p;
    p.temperature = 0;
    return p;
}

}  // namespace

TEST(Generate, FeedsEachTokenButTheLastAndStopsAtN) {
    CountingExecutor ex(100);
    auto s = ex.new_session(64);
    Sampler sampler(greedy());
    std::vector<int32_t> out;
    GenerateOptions o;
    o.n_predict = 5;
    const int32_t prompt[] = {10, 11, 3};
    GenerateStats st = generate(ex, *s, sampler, prompt, o, [&](int32_t t) {
        out.push_back(t);
        return true;
    });
    EXPECT_EQ(out, (std::vector<int32_t>{4, 5, 6, 7, 8}));
    EXPECT_EQ(ex.decoded, (std::vector<int32_t>{4, 5, 6, 7}));
    ASSERT_EQ(ex.prefills.size(), 1u);
    EXPECT_EQ(ex.prefills[0], (std::vector<int32_t>{10, 11, 3}));
    EXPECT_EQ(s->n_past, 3 + 4);
    EXPECT_EQ(st.n_prompt, 3);
    EXPECT_EQ(st.n_generated, 5);
    EXPECT_EQ(st.n_decoded, 4);
    EXPECT_FALSE(st.stopped_at_eog);
    EXPECT_FALSE(st.stopped_at_context);
}

TEST(Generate, StopsAtEndOfGenerationWithoutFeedingIt) {
    CountingExecutor ex(100);
    auto s = ex.new_session(64);
    Sampler sampler(greedy());
    std::vector<int32_t> out;
    GenerateOptions o;
    o.n_predict = -1;
    o.is_eog = [](int32_t t) { return t == 6; };
    const int32_t prompt[] = {3};
    GenerateStats st = generate(ex, *s, sampler, prompt, o, [&](int32_t t) {
        out.push_back(t);
        return true;
    });
    EXPECT_EQ(out, (std::vector<int32_t>{4, 5, 6}));
    EXPECT_EQ(ex.decoded, (std::vector<int32_t>{4, 5}));
    EXPECT_TRUE(st.stopped_at_eog);
}

TEST(Generate, CallbackCanStopAndContextBounds) {
    {
        CountingExecutor ex(100);
        auto s = ex.new_session(64);
        Sampler sampler(greedy());
        int calls = 0;
        GenerateOptions o;
        o.n_predict = 50;
        const int32_t prompt[] = {1};
        generate(ex, *s, sampler, prompt, o, [&](int32_t) { return ++calls < 2; });
        EXPECT_EQ(calls, 2);
        EXPECT_EQ(ex.decoded.size(), 1u);
    }
    {
        CountingExecutor ex(100);
        auto s = ex.new_session(4);
        Sampler sampler(greedy());
        GenerateOptions o;
        o.n_predict = 50;
        const int32_t prompt[] = {1, 2};
        GenerateStats st = generate(ex, *s, sampler, prompt, o, {});
        EXPECT_TRUE(st.stopped_at_context);
        EXPECT_EQ(s->n_past, 4);
        EXPECT_EQ(st.n_generated, 3);  // the third is sampled from position 3's logits
    }
    {
        CountingExecutor ex(100);
        auto s = ex.new_session(4);
        Sampler sampler(greedy());
        const int32_t prompt[] = {1, 2, 3, 4, 5};
        EXPECT_THROW(generate(ex, *s, sampler, prompt, {}, {}), Error);
        EXPECT_TRUE(ex.prefills.empty());  // refused before touching the session
        EXPECT_THROW(generate(ex, *s, sampler, std::span<const int32_t>{}, {}, {}), Error);
        const int32_t bad[] = {100};
        EXPECT_THROW(generate(ex, *s, sampler, bad, {}, {}), Error);
    }
}

TEST(Generate, ReportsTheLogitsOfEveryEvaluatedPosition) {
    CountingExecutor ex(50);
    auto s = ex.new_session(64);
    Sampler sampler(greedy());
    GenerateOptions o;
    o.n_predict = 3;
    o.all_prompt_logits = true;
    std::vector<std::pair<int64_t, int32_t>> seen;  // position, argmax of its row
    o.on_logits = [&](int64_t pos, std::span<const float> row) {
        ASSERT_EQ(row.size(), 50u);
        seen.push_back({pos, (int32_t)(std::max_element(row.begin(), row.end()) - row.begin())});
    };
    const int32_t prompt[] = {7, 20, 30};
    generate(ex, *s, sampler, prompt, o, {});
    std::vector<std::pair<int64_t, int32_t>> want = {{0, 8}, {1, 21}, {2, 31}, {3, 32}, {4, 33}};
    EXPECT_EQ(seen, want);

    // Only the last prompt row without all_prompt_logits, at its true position.
    CountingExecutor ex2(50);
    auto s2 = ex2.new_session(64);
    seen.clear();
    o.all_prompt_logits = false;
    o.n_predict = 1;
    generate(ex2, *s2, sampler, prompt, o, {});
    EXPECT_EQ(seen, (std::vector<std::pair<int64_t, int32_t>>{{2, 31}}));
}

TEST(Generate, AppendsToASessionThatHoldsTokens) {
    CountingExecutor ex(100);
    auto s = ex.new_session(64);
    Sampler sampler(greedy());
    GenerateOptions o;
    o.n_predict = 2;
    const int32_t a[] = {1, 2}, b[] = {40};
    generate(ex, *s, sampler, a, o, {});
    generate(ex, *s, sampler, b, o, {});
    ASSERT_EQ(ex.prefills.size(), 2u);
    EXPECT_EQ(ex.prefills[1], (std::vector<int32_t>{40}));  // no history re-sent
    EXPECT_EQ(s->n_past, 2 + 1 + 1 + 1);
}

TEST(Generate, GreedyOnTheCpuChainMatchesAFreshPrefill) {
    EngineOptions eo;
    eo.device = DeviceSpec::parse("cpu");
    auto engine = Engine::open_image(test::tiny_qwen35_image(), "demo", eo);
    Executor& ex = engine->executor();
    const int64_t V = engine->model().hp.n_vocab;
    std::vector<int32_t> prompt = engine->tokenizer().encode("Once upon a time", true, false);
    ASSERT_FALSE(prompt.empty());
    Sampler sampler(greedy());
    std::vector<int32_t> out;
    GenerateOptions o;
    o.n_predict = 6;
    auto s = engine->new_session();
    generate(ex, *s, sampler, prompt, o, [&](int32_t t) {
        out.push_back(t);
        return true;
    });
    ASSERT_EQ(out.size(), 6u);

    std::vector<int32_t> all = prompt;
    all.insert(all.end(), out.begin(), out.end() - 1);
    auto s2 = engine->new_session();
    std::vector<float> logits;
    ex.prefill(*s2, all, LogitsRows::all, logits);
    ASSERT_EQ((int64_t)logits.size(), (int64_t)all.size() * V);
    for (size_t i = 0; i < out.size(); ++i) {
        const float* row = logits.data() + (prompt.size() - 1 + i) * V;
        float best = *std::max_element(row, row + V);
        // Decode and prefill may round differently: the chosen token must be (within rounding)
        // the best of the prefill's row.
        EXPECT_NEAR(row[out[i]], best, 1e-3f * std::max(1.0f, std::abs(best))) << "token " << i;
    }
}
