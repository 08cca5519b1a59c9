// The scheduler over the CPU chain: many requests with different prompts, lengths and sampling
// served together (prompts in chunks beside running decodes) each give the tokens of the same
// request run alone through generate(); cancellation, the queue bound and shutdown; and the prefix
// cache on hybrid and attention-only models: a hit continues exactly as the cold run.
#include <gtest/gtest.h>

#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "core/threads.h"
#include "cpu/chain.h"
#include "engine/generate.h"
#include "engine/prefix_cache.h"
#include "engine/scheduler.h"
#include "model/tiny_model.h"

namespace dl {
namespace {

using test::TinySpec;

std::shared_ptr<const Model> model_for(const std::string& arch) {
    TinySpec s;
    s.arch = arch;
    if (arch != "qwen35" && arch != "qwen35moe") {
        s.n_layer = 2;
        s.rope_dims = s.head_dim;
    }
    if (arch == "llama") s.rope_freqs = true;
    if (arch == "qwen35moe") s.n_ff_shexp = 24;
    return test::tiny_model(s);
}

// What a request produced, collected from its sink.
struct Result {
    std::vector<int32_t> tokens;
    std::vector<GenerationEvent> events;  // the token events, in order
    GenerationEvent done;
    bool finished = false;
};

// Collects results and lets the test wait for all of them.
class Collector {
  public:
    GenerationSink sink(size_t i, int64_t stop_after = -1) {
        return [this, i, stop_after](const GenerationEvent& e) {
            std::lock_guard lock(m_);
            Result& r = results_[i];
            if (e.kind == GenerationEvent::Kind::done) {
                r.done = e;
                r.finished = true;
                ++n_done_;
                cv_.notify_all();
                return true;
            }
            r.tokens.push_back(e.token);
            r.events.push_back(e);
            return stop_after < 0 || (int64_t)r.tokens.size() < stop_after;
        };
    }
    explicit Collector(size_t n) : results_(n) {}
    void wait_all() {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return n_done_ == results_.size(); });
    }
    void wait_for(size_t i) {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return results_[i].finished; });
    }
    Result& operator[](size_t i) { return results_[i]; }

  private:
    std::mutex m_;
    std::condition_variable cv_;
    std::vector<Result> results_;
    size_t n_done_ = 0;
};

// One request through a scheduler, waited for.
Result run_one(Scheduler& s, const GenerationRequest& r) {
    Collector c(1);
    EXPECT_GT(s.submit(r, c.sink(0)), 0u);
    c.wait_all();
    return c[0];
}

std::vector<int32_t> solo(Executor& ex, const GenerationRequest& r, int64_t n_ctx,
                          const std::function<bool(int32_t)>& is_eog) {
    auto s = ex.new_session(n_ctx);
    Sampler sampler(r.sampling);
    GenerateOptions go;
    go.n_predict = r.max_tokens;
    go.is_eog = is_eog;
    std::vector<int32_t> out;
    generate(ex, *s, sampler, r.prompt, go, [&](int32_t t) {
        out.push_back(t);
        return true;
    });
    return out;
}

SamplerParams greedy() {
    SamplerParams p;
    p.temperature = 0;
    return p;
}

// Sixteen requests with prompts of 1 to 70 tokens, 1 to 24 new tokens, greedy and seeded
// sampling, over 4 slots with a budget of 24 tokens a step (so prompts go in chunks beside the
// others' decodes and requests wait for slots): each equals its solo run token for token.
TEST(Scheduler, EveryRequestEqualsItsSoloRun) {
    auto model = model_for("qwen35");
    cpu::Chain chain(model);
    const int64_t V = model->hp.n_vocab, n_ctx = 128;
    auto is_eog = [](int32_t t) { return t == 3; };
    SchedulerOptions o;
    o.parallel = 4;
    o.n_ctx = n_ctx;
    o.token_budget = 24;
    o.chunk_align = 8;
    o.is_eog = is_eog;
    std::vector<GenerationRequest> reqs;
    for (uint32_t i = 0; i < 16; ++i) {
        GenerationRequest r;
        r.prompt = test::tiny_tokens(1 + (i * 37) % 70, V, 1000 + i);
        r.max_tokens = 1 + (i * 7) % 24;
        r.sampling = greedy();
        if (i % 3 == 1) {
            r.sampling.temperature = 0.9f;
            r.sampling.top_k = 20;
            r.sampling.seed = 77 + i;
        }
        reqs.push_back(r);
    }
    Collector got(reqs.size());
    {
        Scheduler sched(chain, o);
        for (size_t i = 0; i < reqs.size(); ++i) ASSERT_GT(sched.submit(reqs[i], got.sink(i)), 0u);
        got.wait_all();
        const SchedulerStats st = sched.stats();
        EXPECT_EQ(st.running, 0);
        EXPECT_EQ(st.queued, 0);
        EXPECT_EQ(st.requests_done, 16);
        EXPECT_LT(st.steps, 16 * 10);  // requests shared steps
        // Steps that read prompts (several prompts' chunks may share one).
        EXPECT_GE(st.prompt_steps, 1);
        EXPECT_LE(st.prompt_steps, st.steps);
        EXPECT_GT(st.step_seconds, 0.0);
        EXPECT_GT(st.prompt_step_seconds, 0.0);
        EXPECT_LE(st.prompt_step_seconds, st.step_seconds);
    }
    for (size_t i = 0; i < reqs.size(); ++i) {
        SCOPED_TRACE(::testing::Message() << "request " << i);
        const std::vector<int32_t> want = solo(chain, reqs[i], n_ctx, is_eog);
        EXPECT_EQ(got[i].tokens, want);
        EXPECT_EQ(got[i].done.generated_tokens, (int64_t)want.size());
        EXPECT_EQ(got[i].done.prompt_tokens, (int64_t)reqs[i].prompt.size());
        const bool ended = !want.empty() && want.back() == 3;
        EXPECT_EQ(got[i].done.finish, ended ? FinishReason::eog : FinishReason::length);
    }
}

// An executor that records, for each step, the sessions of its items of more than one token (the
// prompt chunks, where every chunk is longer than one) and every item's tokens, and runs the
// step on the chain.
class StepRecorder : public Executor {
  public:
    explicit StepRecorder(Executor& inner) : inner_(inner) {}
    std::string name() const override { return inner_.name(); }
    const Model& model() const override { return inner_.model(); }
    std::unique_ptr<SessionState> new_session(int64_t n_ctx) override {
        return inner_.new_session(n_ctx);
    }
    void prefill(SessionState& s, std::span<const int32_t> tokens, LogitsRows rows,
                 std::vector<float>& logits) override {
        inner_.prefill(s, tokens, rows, logits);
    }
    std::span<const float> decode(SessionState& s, int32_t token) override {
        return inner_.decode(s, token);
    }
    void step(std::span<StepItem> items) override {
        {
            std::unique_lock lock(gate_mutex_);
            ++waiting_;
            gate_.wait(lock, [&] { return open_; });
            --waiting_;
        }
        std::vector<const SessionState*> chunks;
        std::vector<size_t> n;
        for (const StepItem& it : items) {
            if (it.tokens.size() > 1) chunks.push_back(it.session);
            n.push_back(it.tokens.size());
        }
        steps.push_back(chunks);
        sizes.push_back(n);
        inner_.step(items);
    }
    std::unique_ptr<SessionSnapshot> snapshot(const SessionState& s) override {
        return inner_.snapshot(s);
    }
    bool restore(SessionState& s, const SessionSnapshot& z) override {
        return inner_.restore(s, z);
    }
    // Steps wait while held: requests submitted meanwhile are all admitted before any finishes,
    // so no slot's session serves two of them.
    void hold() {
        std::lock_guard lock(gate_mutex_);
        open_ = false;
    }
    void release() {
        {
            std::lock_guard lock(gate_mutex_);
            open_ = true;
        }
        gate_.notify_all();
    }
    // Steps waiting at the gate now.
    int waiting() {
        std::lock_guard lock(gate_mutex_);
        return waiting_;
    }
    std::vector<std::vector<const SessionState*>> steps;
    std::vector<std::vector<size_t>> sizes;

  private:
    Executor& inner_;
    std::mutex gate_mutex_;
    std::condition_variable gate_;
    bool open_ = true;
    int waiting_ = 0;
};

// Prompt chunks a step: at most SchedulerOptions::prompt_chunks (0: the budget's), the earliest
// admitted prompt first, so each prompt is read to its end before the next starts; without the
// limit the budget spreads over several. Tokens equal the solo runs either way.
TEST(Scheduler, PromptChunksAStepEarliestAdmittedFirst) {
    auto model = model_for("qwen3");
    cpu::Chain chain(model);
    const int64_t V = model->hp.n_vocab, n_ctx = 96;
    std::vector<GenerationRequest> reqs;
    for (uint32_t i = 0; i < 4; ++i) {
        GenerationRequest r;
        r.prompt = test::tiny_tokens(40, V, 300 + i);  // chunks of 16, 16 and 8 tokens
        r.max_tokens = 6;
        r.sampling = greedy();
        reqs.push_back(r);
    }
    for (int64_t limit : {1, 0}) {
        SCOPED_TRACE(::testing::Message() << "prompt_chunks " << limit);
        StepRecorder rec(chain);
        SchedulerOptions o;
        o.parallel = 4;
        o.n_ctx = n_ctx;
        o.token_budget = 20;
        o.chunk_align = 8;
        o.prompt_chunks = limit;
        Collector got(reqs.size());
        rec.hold();
        {
            Scheduler sched(rec, o);
            for (size_t i = 0; i < reqs.size(); ++i)  // (no ASSERT: the release must come)
                EXPECT_GT(sched.submit(reqs[i], got.sink(i)), 0u);
            rec.release();
            got.wait_all();
        }
        size_t most = 0;
        std::vector<const SessionState*> order;  // each session, when its first chunk ran
        for (const auto& chunks : rec.steps) {
            most = std::max(most, chunks.size());
            for (const SessionState* s : chunks)
                if (std::find(order.begin(), order.end(), s) == order.end()) order.push_back(s);
        }
        if (limit == 1) {
            EXPECT_EQ(most, 1u);
            // One prompt at a time: a session's chunks all run before the next session's first.
            std::vector<const SessionState*> runs;
            for (const auto& chunks : rec.steps)
                for (const SessionState* s : chunks)
                    if (runs.empty() || runs.back() != s) runs.push_back(s);
            EXPECT_EQ(runs.size(), reqs.size()) << "prompts interleaved";
        } else {
            EXPECT_GE(most, 2u) << "the budget never took two prompts in one step";
        }
        EXPECT_EQ(order.size(), reqs.size());
        for (size_t i = 0; i < reqs.size(); ++i)
            EXPECT_EQ(got[i].tokens, solo(chain, reqs[i], n_ctx, nullptr)) << "request " << i;
    }
}

// A short prompt that arrives while a long one is being read goes first (the fewest tokens left),
// unless the long one has waited long enough (SchedulerOptions::prompt_aging); arrival order with
// prompt_aging < 0. Tokens equal the solo runs in every order.
TEST(Scheduler, TheShortestPromptLeftGoesFirstUnlessTheOtherHasWaited) {
    auto model = model_for("qwen35");
    cpu::Chain chain(model);
    const int64_t V = model->hp.n_vocab, n_ctx = 128;
    GenerationRequest lng, shrt;
    lng.prompt = test::tiny_tokens(64, V, 700);
    shrt.prompt = test::tiny_tokens(16, V, 701);
    lng.max_tokens = shrt.max_tokens = 4;
    lng.sampling = shrt.sampling = greedy();
    struct Case {
        int64_t aging;
        bool short_first;
    };
    for (Case c : {Case{128, false}, Case{0, true}, Case{2, true}, Case{-1, false}}) {
        SCOPED_TRACE(::testing::Message() << "prompt_aging " << c.aging);
        StepRecorder rec(chain);
        SchedulerOptions o;
        o.parallel = 2;
        o.n_ctx = n_ctx;
        o.token_budget = 8;
        o.idle_token_budget = 8;
        o.chunk_align = 8;
        o.prompt_chunks = 1;
        o.prompt_aging = c.aging;
        Collector got(2);
        rec.hold();
        {
            Scheduler sched(rec, o);
            ASSERT_GT(sched.submit(lng, got.sink(0)), 0u);
            // The long prompt's first step is held until the short one is queued.
            while (rec.waiting() == 0) std::this_thread::yield();
            EXPECT_GT(sched.submit(shrt, got.sink(1)), 0u);
            rec.release();
            got.wait_all();
        }
        ASSERT_FALSE(rec.steps.empty());
        ASSERT_EQ(rec.steps[0].size(), 1u);
        const SessionState* long_session = rec.steps[0][0];
        // The step of the short prompt's first chunk, and of the long prompt's last.
        size_t short_at = rec.steps.size(), long_last = 0;
        for (size_t i = 0; i < rec.steps.size(); ++i)
            for (const SessionState* s : rec.steps[i]) {
                if (s == long_session)
                    long_last = i;
                else if (short_at == rec.steps.size())
                    short_at = i;
            }
        ASSERT_LT(short_at, rec.steps.size()) << "the short prompt never ran a chunk";
        // 8-token chunks: the long prompt takes 8 steps; 64 - 8 left against 16 goes short
        // first, and with an aging of 128 a step the long one, admitted a step earlier, keeps
        // its place.
        if (c.short_first)
            EXPECT_LT(short_at, long_last) << "the short prompt waited for the long one";
        else
            EXPECT_GT(short_at, long_last) << "the short prompt went before the long one";
        EXPECT_EQ(got[0].tokens, solo(chain, lng, n_ctx, nullptr));
        EXPECT_EQ(got[1].tokens, solo(chain, shrt, n_ctx, nullptr));
    }
}

// A step with no stream decoding reads up to SchedulerOptions::idle_token_budget of a prompt
// (aligned), one with streams decoding at most token_budget less the decodes; 0 turns the idle
// budget off. Tokens equal the solo runs either way.
TEST(Scheduler, WithNoStreamDecodingAStepReadsUpToTheIdleBudget) {
    auto model = model_for("qwen3");
    cpu::Chain chain(model);
    const int64_t V = model->hp.n_vocab, n_ctx = 96;
    std::vector<GenerationRequest> reqs;
    for (uint32_t i = 0; i < 2; ++i) {
        GenerationRequest r;
        r.prompt = test::tiny_tokens(i == 0 ? 40 : 30, V, 500 + i);
        r.max_tokens = 12;
        r.sampling = greedy();
        reqs.push_back(r);
    }
    for (int64_t idle : {32, 0}) {
        SCOPED_TRACE(::testing::Message() << "idle_token_budget " << idle);
        StepRecorder rec(chain);
        SchedulerOptions o;
        o.parallel = 2;
        o.n_ctx = n_ctx;
        o.token_budget = 10;
        o.idle_token_budget = idle;
        o.chunk_align = 8;
        o.prompt_chunks = 1;  // one prompt at a time: the first prompt's steps alone
        o.prompt_aging = -1;  // the earliest admitted (the longer) first
        Collector got(reqs.size());
        {
            Scheduler sched(rec, o);
            for (size_t i = 0; i < reqs.size(); ++i)
                ASSERT_GT(sched.submit(reqs[i], got.sink(i)), 0u);
            got.wait_all();
        }
        ASSERT_GE(rec.sizes.size(), 3u);
        // The first prompt alone: 32 then 8 tokens with the idle budget, else 8 a step.
        EXPECT_EQ(rec.sizes[0], std::vector<size_t>{idle ? 32u : 8u});
        EXPECT_EQ(rec.sizes[1], std::vector<size_t>{8u});
        for (const auto& step : rec.sizes) {
            const size_t decodes = std::count(step.begin(), step.end(), 1u);
            if (decodes == 0) continue;
            size_t read = 0;
            for (size_t n : step) read += n;
            EXPECT_LE(read, (size_t)o.token_budget) << "a step with decodes past the budget";
        }
        for (size_t i = 0; i < reqs.size(); ++i)
            EXPECT_EQ(got[i].tokens, solo(chain, reqs[i], n_ctx, nullptr)) << "request " << i;
    }
}

// A sink that says stop ends its request after that token; cancel() ends a queued one; the slots
// keep serving the rest.
TEST(Scheduler, StoppedAndCancelledRequestsFreeTheirSlots) {
    auto model = model_for("qwen3");
    cpu::Chain chain(model);
    SchedulerOptions o;
    o.parallel = 1;
    o.n_ctx = 64;
    Collector got(3);
    Scheduler sched(chain, o);
    GenerationRequest r;
    r.prompt = test::tiny_tokens(5, model->hp.n_vocab, 1);
    r.sampling = greedy();
    r.max_tokens = 40;
    const uint64_t a = sched.submit(r, got.sink(0, /*stop_after=*/3));
    const uint64_t b = sched.submit(r, got.sink(1));
    r.max_tokens = 2;
    const uint64_t c = sched.submit(r, got.sink(2));
    ASSERT_TRUE(a && b && c);
    sched.cancel(b);
    got.wait_all();
    EXPECT_EQ(got[0].tokens.size(), 3u);
    EXPECT_EQ(got[0].done.finish, FinishReason::cancelled);
    EXPECT_EQ(got[1].done.finish, FinishReason::cancelled);
    EXPECT_EQ(got[2].tokens.size(), 2u);
    EXPECT_EQ(got[2].done.finish, FinishReason::length);
    EXPECT_EQ(sched.stats().running, 0);
}

// A rule that allows one token a step, from a fixed list in turn, and records what it is told.
class OneTokenAtATime : public TokenConstraint {
  public:
    explicit OneTokenAtATime(std::vector<int32_t> order) : order_(std::move(order)) {}
    int64_t mask(std::span<float> logits) override {
        if (order_.empty()) return 0;
        const int32_t keep = order_[accepted.size() % order_.size()];
        for (size_t i = 0; i < logits.size(); ++i)
            if ((int32_t)i != keep) logits[i] = -std::numeric_limits<float>::infinity();
        return 1;
    }
    void accept(int32_t token) override { accepted.push_back(token); }
    std::vector<int32_t> accepted;

  private:
    std::vector<int32_t> order_;
};

// A constrained request draws only what its constraint allows, beside an unconstrained one that
// still equals its solo run; a constraint that allows nothing ends its request with an error.
TEST(Scheduler, ConstrainedRequestsDrawOnlyWhatTheirRuleAllows) {
    auto model = model_for("qwen35");
    cpu::Chain chain(model);
    const int64_t V = model->hp.n_vocab;
    SchedulerOptions o;
    o.parallel = 3;
    o.n_ctx = 64;
    GenerationRequest free;
    free.prompt = test::tiny_tokens(7, V, 3);
    free.sampling = greedy();
    free.max_tokens = 6;
    const Result solo = [&] {
        Scheduler alone(chain, o);
        return run_one(alone, free);
    }();
    Scheduler sched(chain, o);
    GenerationRequest ruled = free;
    ruled.sampling.temperature = 1.0f;
    ruled.sampling.seed = 5;
    auto rule = std::make_shared<OneTokenAtATime>(std::vector<int32_t>{3, (int32_t)V - 1, 3, 7});
    ruled.constraint = rule;
    GenerationRequest none = free;
    none.constraint = std::make_shared<OneTokenAtATime>(std::vector<int32_t>{});
    Collector got(3);
    ASSERT_TRUE(sched.submit(ruled, got.sink(0)) && sched.submit(free, got.sink(1)) &&
                sched.submit(none, got.sink(2)));
    got.wait_all();
    EXPECT_EQ(got[0].tokens, (std::vector<int32_t>{3, (int32_t)V - 1, 3, 7, 3, (int32_t)V - 1}));
    EXPECT_EQ(rule->accepted, got[0].tokens);
    EXPECT_EQ(got[1].tokens, solo.tokens);
    EXPECT_EQ(got[2].done.finish, FinishReason::error);
    EXPECT_TRUE(got[2].tokens.empty());

    // Log-probabilities are those of the masked row: the one token allowed is certain, and the
    // tokens ruled out are no alternatives.
    GenerationRequest asked = ruled;
    asked.constraint = std::make_shared<OneTokenAtATime>(std::vector<int32_t>{4});
    asked.top_logprobs = 3;
    asked.max_tokens = 2;
    const std::vector<GenerationEvent> events = run_one(sched, asked).events;
    ASSERT_EQ(events.size(), 2u);
    for (const GenerationEvent& e : events) {
        EXPECT_EQ(e.token, 4);
        EXPECT_FLOAT_EQ(e.logprob, 0.f);
        ASSERT_EQ(e.top.size(), 1u);
        EXPECT_EQ(e.top[0].token, 4);
    }
}

// The queue is bounded, requests that can never run are errors, and shutdown(true) finishes what
// was accepted while refusing new work.
TEST(Scheduler, BoundedQueueBadRequestsAndShutdown) {
    auto model = model_for("llama");
    cpu::Chain chain(model);
    SchedulerOptions o;
    o.parallel = 1;
    o.n_ctx = 32;
    o.queue_limit = 2;
    Scheduler sched(chain, o);
    GenerationRequest r;
    r.prompt = test::tiny_tokens(4, model->hp.n_vocab, 9);
    r.sampling = greedy();
    r.max_tokens = 20;
    Collector got(3);
    std::vector<uint64_t> ids;
    for (size_t i = 0; i < 3; ++i) ids.push_back(sched.submit(r, got.sink(i)));
    // The first may already have left the queue for the slot; at most two wait.
    const uint64_t extra = sched.submit(r, [](const GenerationEvent&) { return true; });
    EXPECT_TRUE(ids[2] == 0 || extra == 0);
    GenerationRequest bad = r;
    bad.prompt = test::tiny_tokens(32, model->hp.n_vocab, 1);
    EXPECT_THROW(sched.submit(bad, {}), Error);  // does not fit the context
    bad.prompt = {(int32_t)model->hp.n_vocab};
    EXPECT_THROW(sched.submit(bad, {}), Error);  // outside the vocabulary
    bad.prompt = {};
    EXPECT_THROW(sched.submit(bad, {}), Error);
    sched.shutdown(/*finish=*/true);
    EXPECT_EQ(sched.submit(r, {}), 0u);
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_TRUE(got[i].finished);
        EXPECT_EQ(got[i].done.finish, FinishReason::length);
        EXPECT_EQ(got[i].tokens.size(), 20u);
    }
}

class PrefixCacheHit : public ::testing::TestWithParam<const char*> {};

// Turn 1 generates; turn 2's prompt is turn 1's prompt, its reply and a new message. With the
// cache, turn 2 starts from turn 1's snapshot (its prompt and reply but the last token, which was
// never fed) and prefills only the rest, and its tokens equal a cold run's. Then a request that
// shares only a snapshot point (snapshot_at) of another prompt starts there.
TEST_P(PrefixCacheHit, AHitContinuesExactlyAsTheColdRun) {
    auto model = model_for(GetParam());
    cpu::Chain chain(model);
    const int64_t V = model->hp.n_vocab;
    SchedulerOptions o;
    o.parallel = 2;
    o.n_ctx = 160;
    o.token_budget = 32;
    o.chunk_align = 16;
    GenerationRequest t1;
    t1.prompt = test::tiny_tokens(40, V, 4);
    t1.sampling = greedy();
    t1.max_tokens = 12;
    t1.snapshot_at = {24};
    o.prefix_cache_bytes = 64u << 20;
    Scheduler warm(chain, o);
    const Result r1 = run_one(warm, t1);
    ASSERT_EQ(r1.tokens.size(), 12u);
    EXPECT_EQ(r1.done.cached_tokens, 0);

    GenerationRequest t2 = t1;
    t2.snapshot_at.clear();
    t2.prompt.insert(t2.prompt.end(), r1.tokens.begin(), r1.tokens.end());
    const auto more = test::tiny_tokens(9, V, 5);
    t2.prompt.insert(t2.prompt.end(), more.begin(), more.end());
    const Result hit = run_one(warm, t2);
    EXPECT_EQ(hit.done.cached_tokens, 40 + 11);

    GenerationRequest t3 = t1;
    t3.snapshot_at.clear();
    t3.prompt.resize(24);
    const auto other = test::tiny_tokens(10, V, 6);
    t3.prompt.insert(t3.prompt.end(), other.begin(), other.end());
    const Result boundary = run_one(warm, t3);
    EXPECT_EQ(boundary.done.cached_tokens, 24);

    o.prefix_cache_bytes = 0;
    Scheduler cold(chain, o);
    EXPECT_EQ(hit.tokens, run_one(cold, t2).tokens);
    EXPECT_EQ(boundary.tokens, run_one(cold, t3).tokens);
    EXPECT_EQ(warm.stats().cached_tokens, 51 + 24);
}

// A chunk ends on a snapshot point the request names, not on the aligned position before it (one
// window, not two); with no prefix cache the point is no boundary at all. Tokens equal the solo
// run either way.
TEST(Scheduler, AChunkEndsOnASnapshotPointUnaligned) {
    auto model = model_for("qwen35");
    cpu::Chain chain(model);
    GenerationRequest r;
    r.prompt = test::tiny_tokens(44, model->hp.n_vocab, 12);
    r.sampling = greedy();
    r.max_tokens = 3;
    r.snapshot_at = {20};
    for (bool cache : {true, false}) {
        SCOPED_TRACE(cache ? "with a prefix cache" : "without");
        StepRecorder rec(chain);
        SchedulerOptions o;
        o.parallel = 1;
        o.n_ctx = 64;
        o.token_budget = 64;
        o.idle_token_budget = 64;
        o.chunk_align = 16;
        o.prefix_cache_bytes = cache ? 64u << 20 : 0;
        Scheduler sched(rec, o);
        EXPECT_EQ(run_one(sched, r).tokens, solo(chain, r, 64, nullptr));
        ASSERT_GE(rec.sizes.size(), 2u);
        if (cache) {
            EXPECT_EQ(rec.sizes[0], std::vector<size_t>{20u});
            EXPECT_EQ(rec.sizes[1], std::vector<size_t>{24u});
        } else {
            EXPECT_EQ(rec.sizes[0], std::vector<size_t>{44u});
        }
    }
}

// n greedy requests of max_tokens that share a 45-token beginning (one system prompt) and then
// differ: request i asks a question of 9 + 3i tokens.
std::vector<GenerationRequest> sharing_a_beginning(int64_t V, uint32_t n, uint32_t seed,
                                                   int64_t max_tokens) {
    const auto system = test::tiny_tokens(45, V, seed);
    std::vector<GenerationRequest> r(n);
    for (uint32_t i = 0; i < n; ++i) {
        r[i].sampling = greedy();
        r[i].max_tokens = max_tokens;
        r[i].prompt = system;
        const auto q = test::tiny_tokens(9 + 3 * i, V, seed + 1 + i);
        r[i].prompt.insert(r[i].prompt.end(), q.begin(), q.end());
    }
    return r;
}

// One slot of 128 tokens with a prefix cache, chunks aligned to 16, a snapshot interval of
// `every` tokens.
SchedulerOptions one_cached_slot(int64_t every) {
    SchedulerOptions o;
    o.parallel = 1;
    o.n_ctx = 128;
    o.chunk_align = 16;
    o.snapshot_every = every;
    o.prefix_cache_bytes = 64u << 20;
    return o;
}

// Prompts that share a long beginning and then differ. The first prompt is prefilled in one
// chunk, so the cache holds only its end: the second, which parts from it at 45 tokens, starts
// cold and keeps a snapshot where they part (aligned down to 32); the third starts there. Each
// answers exactly as cold.
TEST_P(PrefixCacheHit, ASecondPromptKeepsWhereItPartsAndAThirdStartsThere) {
    auto model = model_for(GetParam());
    cpu::Chain chain(model);
    SchedulerOptions o = one_cached_slot(16);
    o.token_budget = 64;
    const auto r = sharing_a_beginning(model->hp.n_vocab, 3, 21, 5);
    Scheduler warm(chain, o);
    std::vector<Result> got;
    for (const auto& q : r) got.push_back(run_one(warm, q));
    EXPECT_EQ(got[0].done.cached_tokens, 0);
    EXPECT_EQ(got[1].done.cached_tokens, 0);   // only the first prompt's end was cached
    EXPECT_EQ(got[2].done.cached_tokens, 32);  // where the second parted from the first
    o.prefix_cache_bytes = 0;
    Scheduler cold(chain, o);
    for (size_t i = 0; i < r.size(); ++i) EXPECT_EQ(got[i].tokens, run_one(cold, r[i]).tokens) << i;
}

// Waypoints: a prompt prefilled in chunks of 16 keeps a snapshot at the end of each chunk that
// passes a multiple of 32 (at 32, not 48), without cutting a chunk for it; a prompt that shares
// its first 45 tokens starts from 32 and answers as cold.
TEST_P(PrefixCacheHit, AChunkPassingAMultipleOfTheIntervalLeavesAWaypoint) {
    auto model = model_for(GetParam());
    cpu::Chain chain(model);
    StepRecorder rec(chain);
    SchedulerOptions o = one_cached_slot(32);
    o.token_budget = 16;
    o.idle_token_budget = 16;
    const auto r = sharing_a_beginning(model->hp.n_vocab, 2, 31, 4);
    Scheduler warm(rec, o);
    EXPECT_EQ(run_one(warm, r[0]).done.cached_tokens, 0);
    ASSERT_GE(rec.sizes.size(), 4u);
    for (size_t i = 0; i < 4; ++i)  // 54 tokens: 16, 16, 16, 6, no chunk cut for the waypoint
        EXPECT_EQ(rec.sizes[i], std::vector<size_t>{i < 3 ? 16u : 6u}) << i;
    const Result hit = run_one(warm, r[1]);
    EXPECT_EQ(hit.done.cached_tokens, 32);
    o.prefix_cache_bytes = 0;
    Scheduler cold(chain, o);
    EXPECT_EQ(hit.tokens, run_one(cold, r[1]).tokens);
}

// The next turn of a chat renders the reply again, and may tokenize it otherwise: where it parts
// from the last turn inside that reply, 30 tokens past the prompt, is no point another prompt
// shares, so no snapshot is kept there and the new tokens after the restored prompt are read as
// one chunk (not cut at 48); the answer is the cold one.
TEST(PrefixCache, AReplyTokenizedOtherwiseIsNoPartingPoint) {
    auto model = model_for("qwen35");
    cpu::Chain chain(model);
    const int64_t V = model->hp.n_vocab;
    StepRecorder rec(chain);
    SchedulerOptions o = one_cached_slot(16);
    o.token_budget = 64;
    Scheduler warm(rec, o);
    GenerationRequest a;
    a.sampling = greedy();
    a.prompt = test::tiny_tokens(20, V, 41);
    a.max_tokens = 40;
    a.ignore_eos = true;
    const Result first = run_one(warm, a);
    ASSERT_EQ(first.tokens.size(), 40u);
    GenerationRequest b = a;
    b.max_tokens = 4;
    b.prompt.insert(b.prompt.end(), first.tokens.begin(), first.tokens.begin() + 30);
    b.prompt.push_back((first.tokens[30] + 1) % (int32_t)V);  // the reply, tokenized otherwise
    const auto more = test::tiny_tokens(10, V, 42);
    b.prompt.insert(b.prompt.end(), more.begin(), more.end());
    const size_t steps_before = rec.sizes.size();
    const Result hit = run_one(warm, b);
    EXPECT_EQ(hit.done.cached_tokens, 20);
    ASSERT_GT(rec.sizes.size(), steps_before);
    EXPECT_EQ(rec.sizes[steps_before], std::vector<size_t>{b.prompt.size() - 20});
    o.prefix_cache_bytes = 0;
    Scheduler cold(chain, o);
    EXPECT_EQ(hit.tokens, run_one(cold, b).tokens);
}

// The mixtures too: the experts hold no state, and qwen35moe's DeltaNet layers are snapshotted as
// qwen35's are.
// A prompt that begins with another still being prefilled (a chat's next turn behind the warm-up
// of its beginning) waits for that prompt's end and starts from its snapshot, rather than
// prefilling the same 80 tokens in the slot beside it; it answers as cold.
TEST_P(PrefixCacheHit, APromptWaitsForTheRunningPrefillOfItsBeginning) {
    auto model = model_for(GetParam());
    cpu::Chain chain(model);
    const int64_t V = model->hp.n_vocab;
    StepRecorder rec(chain);
    SchedulerOptions o;
    o.parallel = 2;
    o.n_ctx = 160;
    o.token_budget = 16;
    o.idle_token_budget = 16;
    o.chunk_align = 16;
    o.prefix_cache_bytes = 64u << 20;
    GenerationRequest first;
    first.prompt = test::tiny_tokens(80, V, 41);
    first.sampling = greedy();
    first.max_tokens = 1;
    GenerationRequest next = first;
    const auto more = test::tiny_tokens(10, V, 42);
    next.prompt.insert(next.prompt.end(), more.begin(), more.end());
    next.max_tokens = 6;
    Scheduler warm(rec, o);
    Collector c(2);
    rec.hold();
    ASSERT_GT(warm.submit(first, c.sink(0)), 0u);
    while (rec.waiting() == 0) std::this_thread::yield();  // its first chunk is at the gate
    ASSERT_GT(warm.submit(next, c.sink(1)), 0u);
    rec.release();
    c.wait_all();
    EXPECT_EQ(c[1].done.cached_tokens, 80);
    size_t prefilled = 0;  // tokens read in chunks of more than one
    for (const auto& step : rec.sizes)
        for (size_t n : step) prefilled += n > 1 ? n : 0;
    EXPECT_EQ(prefilled, 80u + 10u);
    o.prefix_cache_bytes = 0;
    Scheduler cold(chain, o);
    EXPECT_EQ(c[1].tokens, run_one(cold, next).tokens);
}

// A warm-up (GenerationRequest::warm_up) waits its delay before it runs: a request whose prompt
// begins with its prompt, submitted meanwhile, takes its place (the warm-up ends cancelled, having
// read nothing) and reads the whole prompt itself, as cold; other requests pass it in the queue.
// Past its delay it runs, and the request after it starts from its snapshot.
TEST_P(PrefixCacheHit, AWarmUpWaitsItsDelayAndGivesWayToItsNextTurn) {
    auto model = model_for(GetParam());
    cpu::Chain chain(model);
    const int64_t V = model->hp.n_vocab;
    SchedulerOptions o;
    o.parallel = 2;
    o.n_ctx = 160;
    o.chunk_align = 16;
    o.prefix_cache_bytes = 64u << 20;
    GenerationRequest warm_up;
    warm_up.prompt = test::tiny_tokens(64, V, 43);
    warm_up.sampling = greedy();
    warm_up.max_tokens = 1;
    warm_up.warm_up = true;
    warm_up.warm_up_delay = 30;  // (seconds: it is superseded long before)
    GenerationRequest next = warm_up;
    next.warm_up = false;
    const auto more = test::tiny_tokens(12, V, 44);
    next.prompt.insert(next.prompt.end(), more.begin(), more.end());
    next.max_tokens = 5;
    GenerationRequest other;
    other.prompt = test::tiny_tokens(20, V, 45);
    other.sampling = greedy();
    other.max_tokens = 3;
    {
        Scheduler s(chain, o);
        Collector c(3);
        ASSERT_GT(s.submit(warm_up, c.sink(0)), 0u);
        ASSERT_GT(s.submit(other, c.sink(1)), 0u);  // not held behind the warm-up
        c.wait_for(1);
        EXPECT_FALSE(c[0].finished);
        ASSERT_GT(s.submit(next, c.sink(2)), 0u);
        c.wait_all();
        EXPECT_EQ(c[0].done.finish, FinishReason::cancelled);
        EXPECT_TRUE(c[0].tokens.empty());
        EXPECT_EQ(c[2].done.cached_tokens, 0);
        const SchedulerStats st = s.stats();
        EXPECT_EQ(st.prompt_tokens, (int64_t)(other.prompt.size() + next.prompt.size()));
    }
    {  // Warm-ups take none of the queue's places for clients.
        o.queue_limit = 2;
        o.parallel = 1;
        Scheduler s(chain, o);
        Collector c(5);
        GenerationRequest held = other;
        held.max_tokens = 40;
        ASSERT_GT(s.submit(held, c.sink(0)), 0u);  // (in the slot, or first in the queue)
        for (size_t i = 1; i <= 2; ++i) ASSERT_GT(s.submit(warm_up, c.sink(i)), 0u);
        EXPECT_EQ(s.submit(warm_up, c.sink(3)), 0u);  // the warm-ups' places are taken
        GenerationRequest client = other;
        client.prompt[0] = (client.prompt[0] + 1) % (int32_t)V;
        EXPECT_GT(s.submit(client, c.sink(4)), 0u);
        EXPECT_GE(s.waiting(), 1);  // the client, not the warm-ups
        s.shutdown(false);
        o.queue_limit = 64;
        o.parallel = 2;
    }
    {
        warm_up.warm_up_delay = 0.05;
        Scheduler s(chain, o);
        Collector c(2);
        ASSERT_GT(s.submit(warm_up, c.sink(0)), 0u);
        c.wait_for(0);
        EXPECT_EQ(c[0].done.finish, FinishReason::length);
        EXPECT_GE(c[0].done.queue_seconds, 0.05);
        ASSERT_GT(s.submit(next, c.sink(1)), 0u);
        c.wait_all();
        EXPECT_GE(c[1].done.cached_tokens, 48);
        o.prefix_cache_bytes = 0;
        Scheduler cold(chain, o);
        EXPECT_EQ(c[1].tokens, run_one(cold, next).tokens);
    }
}

INSTANTIATE_TEST_SUITE_P(Models, PrefixCacheHit,
                         ::testing::Values("qwen35", "qwen3", "llama", "qwen35moe", "qwen3moe"));

// A budget that holds about two snapshots: the least recently used go, the bytes stay under the
// budget, and every request still equals its cold run.
TEST(PrefixCacheEviction, UnderMemoryPressureTheOldestGoAndAnswersStayExact) {
    auto model = model_for("qwen35");
    // The two schedulers run at once: each chain has its own threads.
    ThreadPool pool_a(2), pool_b(2);
    cpu::Chain chain(model, {}, &pool_a), cold_chain(model, {}, &pool_b);
    const int64_t V = model->hp.n_vocab;
    auto probe = chain.new_session(96);
    std::vector<float> l;
    chain.prefill(*probe, test::tiny_tokens(30, V, 1), LogitsRows::last, l);
    const uint64_t one = chain.snapshot(*probe)->bytes;
    SchedulerOptions o;
    o.parallel = 1;
    o.n_ctx = 96;
    o.prefix_cache_bytes = one * 2 + one / 2;
    Scheduler warm(chain, o);
    o.prefix_cache_bytes = 0;
    Scheduler cold(cold_chain, o);
    for (uint32_t i = 0; i < 6; ++i) {
        GenerationRequest r;
        r.prompt = test::tiny_tokens(30, V, 50 + i % 3);  // three prompts, each seen twice
        r.sampling = greedy();
        r.max_tokens = 4;
        Collector a(1), b(1);
        warm.submit(r, a.sink(0));
        cold.submit(r, b.sink(0));
        a.wait_all();
        b.wait_all();
        EXPECT_EQ(a[0].tokens, b[0].tokens) << "request " << i;
        const SchedulerStats st = warm.stats();
        EXPECT_LE(st.cache_bytes, one * 2 + one / 2);
    }
    EXPECT_LE(warm.stats().cache_entries, 2u);
    EXPECT_GT(warm.stats().snapshot_seconds, 0.0);
    EXPECT_EQ(cold.stats().snapshot_seconds, 0.0);
}

// Room for two snapshots: a third goes in by dropping a waypoint that no lookup restored, though
// the other entry is the least recently used; a waypoint that served a prompt is kept as any
// other entry (the least recently used goes).
TEST(PrefixCache, AWaypointNoPromptUsedGoesFirst) {
    auto model = model_for("qwen35");
    cpu::Chain chain(model);
    const int64_t V = model->hp.n_vocab;
    const auto t = test::tiny_tokens(40, V, 9);
    std::vector<float> l;
    auto session_of = [&](int64_t n) {
        auto s = chain.new_session(64);
        chain.prefill(*s, std::span(t).first((size_t)n), LogitsRows::last, l);
        return s;
    };
    const uint64_t one = chain.snapshot(*session_of(8))->bytes;
    ASSERT_GT(one, 0u);
    for (bool used : {false, true}) {
        SCOPED_TRACE(used ? "the waypoint served a prompt" : "no prompt used the waypoint");
        PrefixCache cache(chain, 2 * one + one / 2);
        cache.put(std::span(t).first(8), *session_of(8));          // the oldest
        cache.put(std::span(t).first(16), *session_of(16), true);  // a waypoint
        auto probe = chain.new_session(64);
        if (used) {
            ASSERT_EQ(cache.restore(std::span(t).first(20), 20, *probe), 16);
        }
        cache.put(std::span(t).first(24), *session_of(24));
        EXPECT_EQ(cache.entries(), 2u);
        // 20 tokens: the waypoint of 16 if it stayed, else the entry of 8.
        EXPECT_EQ(cache.restore(std::span(t).first(20), 20, *probe), used ? 16 : 8);
    }
}

// The cache compares tokens on every hash match and only restores whole entries.
TEST(PrefixCache, LongestMatchAndNeverAPartialOne) {
    auto model = model_for("qwen3");
    cpu::Chain chain(model);
    const int64_t V = model->hp.n_vocab;
    PrefixCache cache(chain, 64u << 20);
    const auto t = test::tiny_tokens(20, V, 8);
    std::vector<float> l;
    for (int64_t n : {5, 12}) {
        auto s = chain.new_session(64);
        chain.prefill(*s, std::span(t).first((size_t)n), LogitsRows::last, l);
        cache.put(std::span(t).first((size_t)n), *s);
    }
    auto s = chain.new_session(64);
    EXPECT_EQ(cache.restore(t, 20, *s), 12);
    EXPECT_EQ(s->n_past, 12);
    EXPECT_EQ(cache.restore(t, 11, *s), 5);  // at most 11 tokens
    std::vector<int32_t> other = t;
    other[7] ^= 1;  // differs inside the longer entry
    EXPECT_EQ(cache.restore(other, 20, *s), 5);
    other[2] ^= 1;
    auto untouched = chain.new_session(64);
    EXPECT_EQ(cache.restore(other, 20, *untouched), 0);
    EXPECT_EQ(untouched->n_past, 0);
    EXPECT_EQ(prefix_hashes(t).size(), t.size() + 1);
}

}  // namespace
}  // namespace dl
