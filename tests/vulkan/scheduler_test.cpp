// The scheduler over the resident driver: requests served together (prompts in chunks beside
// decodes, tokens sampled on the device with each request's own seed) equal the same requests run
// alone through generate(), and a prefix-cache hit (a snapshot in device memory) continues
// exactly as the cold run. The driver runs a step's items one by one today, so this holds the
// scheduler's use of it (chunking, device sampling, snapshots into reused sessions).
#include <gtest/gtest.h>

#include <condition_variable>
#include <limits>
#include <mutex>

#include "engine/generate.h"
#include "engine/scheduler.h"
#include "model/tiny_model.h"
#include "vk_test.h"
#include "vulkan/driver.h"

namespace dl::vk {
namespace {

struct Outcome {
    std::vector<int32_t> tokens;
    GenerationEvent done;
};

// Submits the requests together to a scheduler and returns each one's tokens and end.
std::vector<Outcome> submit_all(Scheduler& s, const std::vector<GenerationRequest>& reqs) {
    std::vector<Outcome> out(reqs.size());
    std::mutex m;
    std::condition_variable cv;
    size_t done = 0;
    for (size_t i = 0; i < reqs.size(); ++i)
        s.submit(reqs[i], [&, i](const GenerationEvent& e) {
            std::lock_guard lock(m);
            if (e.kind == GenerationEvent::Kind::token) {
                out[i].tokens.push_back(e.token);
            } else {
                out[i].done = e;
                ++done;
                cv.notify_all();
            }
            return true;
        });
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return done == reqs.size(); });
    return out;
}

// The same through a scheduler of its own.
std::vector<Outcome> serve(Executor& ex, SchedulerOptions o,
                           const std::vector<GenerationRequest>& reqs) {
    Scheduler s(ex, std::move(o));
    return submit_all(s, reqs);
}

// The tokens a request gets run alone through generate(), in a session of n_ctx tokens.
std::vector<int32_t> solo_run(Executor& ex, const GenerationRequest& r, int64_t n_ctx) {
    auto s = ex.new_session(n_ctx);
    Sampler sampler(r.sampling);
    GenerateOptions go;
    go.n_predict = r.max_tokens;
    std::vector<int32_t> tokens;
    generate(ex, *s, sampler, r.prompt, go, [&](int32_t t) {
        tokens.push_back(t);
        return true;
    });
    return tokens;
}

DriverOptions options() {
    DriverOptions o;
    o.device = test::device_options();
    o.plan.n_ctx = 96;
    o.plan.sequences = 8;  // the scheduler's slots, its empty state, and the solo runs
    // Every GEMM of these tests (steps of a dozen rows, solo prompts of up to 40) on the batched
    // GEMV, so a request served in chunks computes in the arithmetic of its solo run: a 40-row
    // solo window on a GPU's F16 tiles drew another token at temperature 0.7 than the same
    // prompt read in F32 chunks (H100).
    o.tuning.gemm_gemv_rows = 64;
    return o;
}

void check_served_together(const dl::test::TinySpec& spec) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(spec);
    auto drv = ResidentDriver::create(model, options());
    ASSERT_TRUE(drv.ok()) << drv.reason();
    Executor& ex = **drv;
    const int64_t V = model->hp.n_vocab;
    std::vector<GenerationRequest> reqs;
    for (uint32_t i = 0; i < 6; ++i) {
        GenerationRequest r;
        r.prompt = dl::test::tiny_tokens(1 + (i * 13) % 40, V, 300 + i);
        r.max_tokens = 2 + (i * 5) % 9;
        r.sampling.temperature = i % 2 ? 0.7f : 0.0f;  // odd ones sample on the device
        r.sampling.seed = 40 + i;
        reqs.push_back(r);
    }
    SchedulerOptions o;
    o.parallel = 3;
    o.n_ctx = 96;
    o.token_budget = 12;
    o.chunk_align = 4;
    const std::vector<Outcome> got = serve(ex, o, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
        SCOPED_TRACE(::testing::Message() << "request " << i);
        EXPECT_EQ(got[i].tokens, solo_run(ex, reqs[i], 96));
        EXPECT_EQ(got[i].done.finish, FinishReason::length);
    }
}

TEST(VulkanScheduler, RequestsServedTogetherEqualTheirSoloRuns) {
    check_served_together(test::parity_spec("qwen35"));
}
// A mixture of experts: its batched steps choose and group experts over the rows.
TEST(VulkanScheduler, MixtureRequestsServedTogetherEqualTheirSoloRuns) {
    check_served_together(test::moe_spec("qwen35moe"));
}

// A constrained request (its step returns logits; the host masks them and draws) beside one
// sampled on the device: each gets what it would alone.
TEST(VulkanScheduler, AConstrainedRequestDrawsOnTheHostBesideDeviceSampling) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(test::parity_spec("qwen35"));
    auto drv = ResidentDriver::create(model, options());
    ASSERT_TRUE(drv.ok()) << drv.reason();
    Executor& ex = **drv;
    const int32_t V = (int32_t)model->hp.n_vocab;
    // Allows one token a step, from a list in turn.
    struct Alternate : TokenConstraint {
        std::vector<int32_t> order, accepted;
        int64_t mask(std::span<float> logits) override {
            const int32_t keep = order[accepted.size() % order.size()];
            for (size_t i = 0; i < logits.size(); ++i)
                if ((int32_t)i != keep) logits[i] = -std::numeric_limits<float>::infinity();
            return 1;
        }
        void accept(int32_t t) override { accepted.push_back(t); }
    };
    GenerationRequest sampled;
    sampled.prompt = dl::test::tiny_tokens(12, V, 4);
    sampled.sampling.temperature = 0.9f;
    sampled.sampling.seed = 11;
    sampled.max_tokens = 5;
    GenerationRequest ruled = sampled;
    auto rule = std::make_shared<Alternate>();
    rule->order = {V - 1, 2, 5};
    ruled.constraint = rule;
    SchedulerOptions o;
    o.parallel = 2;
    o.n_ctx = 64;
    const std::vector<Outcome> both = serve(ex, o, {ruled, sampled});
    EXPECT_EQ(both[0].tokens, (std::vector<int32_t>{V - 1, 2, 5, V - 1, 2}));
    EXPECT_EQ(rule->accepted, both[0].tokens);
    EXPECT_EQ(both[1].tokens, solo_run(ex, sampled, 64));
}

TEST(VulkanScheduler, APrefixHitContinuesExactlyAsTheColdRun) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(test::parity_spec("qwen35"));
    auto drv = ResidentDriver::create(model, options());
    ASSERT_TRUE(drv.ok()) << drv.reason();
    Executor& ex = **drv;
    const int64_t V = model->hp.n_vocab;
    GenerationRequest t1;
    t1.prompt = dl::test::tiny_tokens(30, V, 9);
    t1.sampling.temperature = 0;
    t1.max_tokens = 6;
    SchedulerOptions o;
    o.parallel = 2;
    o.n_ctx = 96;
    o.prefix_cache_bytes = 16u << 20;
    const std::vector<Outcome> first = serve(ex, o, {t1});
    GenerationRequest t2 = t1;
    // One scheduler holds both turns (its cache lives with it).
    t2.prompt.insert(t2.prompt.end(), first[0].tokens.begin(), first[0].tokens.end());
    const auto more = dl::test::tiny_tokens(7, V, 10);
    t2.prompt.insert(t2.prompt.end(), more.begin(), more.end());
    std::vector<Outcome> warm_turns;
    {
        Scheduler s(ex, o);
        warm_turns.push_back(submit_all(s, {t1})[0]);
        warm_turns.push_back(submit_all(s, {t2})[0]);
    }
    EXPECT_EQ(warm_turns[0].tokens, first[0].tokens);
    EXPECT_EQ(warm_turns[1].done.cached_tokens, 30 + 5);
    o.prefix_cache_bytes = 0;
    const std::vector<Outcome> cold = serve(ex, o, {t2});
    EXPECT_EQ(warm_turns[1].tokens, cold[0].tokens);
    EXPECT_EQ(cold[0].done.cached_tokens, 0);
}

// Device memory for about one snapshot: older ones move to host memory and are still restored
// from there (exactly as the cold run); the device's share stays under its budget.
TEST(VulkanScheduler, SnapshotsPastTheDeviceBudgetMoveToTheHostAndStillHit) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(test::parity_spec("qwen35"));
    auto drv = ResidentDriver::create(model, options());
    ASSERT_TRUE(drv.ok()) << drv.reason();
    Executor& ex = **drv;
    const int64_t V = model->hp.n_vocab;
    auto probe = ex.new_session(96);
    std::vector<float> l;
    ex.prefill(*probe, dl::test::tiny_tokens(20, V, 1), LogitsRows::last, l);
    const uint64_t one = ex.snapshot(*probe)->bytes;
    SchedulerOptions o;
    o.parallel = 1;
    o.n_ctx = 96;
    o.prefix_cache_bytes = one + one / 2;
    o.prefix_cache_host_bytes = 64u << 20;
    std::vector<GenerationRequest> first;
    for (uint32_t i = 0; i < 3; ++i) {
        GenerationRequest r;
        r.prompt = dl::test::tiny_tokens(20, V, 50 + i);
        r.sampling.temperature = 0;
        r.max_tokens = 2;
        first.push_back(r);
    }
    GenerationRequest again = first[0];
    const auto more = dl::test::tiny_tokens(6, V, 60);
    again.prompt.insert(again.prompt.end(), more.begin(), more.end());
    std::vector<Outcome> warm;
    SchedulerStats st;
    {
        Scheduler s(ex, o);
        for (const auto& r : first) submit_all(s, {r});
        warm = submit_all(s, {again});
        st = s.stats();
    }
    EXPECT_EQ(warm[0].done.cached_tokens, 20);  // first[0]'s prompt, restored from the host
    EXPECT_GT(st.cache_host_bytes, 0u);
    EXPECT_LE(st.cache_bytes, one + one / 2);
    o.prefix_cache_bytes = 0;
    const std::vector<Outcome> cold = serve(ex, o, {again});
    EXPECT_EQ(warm[0].tokens, cold[0].tokens);
}

// A KV cache too small for every slot's sequence at once: 4 blocks of 64 rows, three slots whose
// requests reach 100 rows (2 blocks) each. The request admitted last gives its rows back when a
// step finds none, goes back to the queue and resumes once another has finished. With a prefix
// cache, whose snapshots hold blocks too, those go to host memory first. No request is lost or
// crossed: each one's tokens are its solo run's, and when all are done no row is held but the
// cache's.
void check_full_kv_cache(bool prefix_cache) {
    VK_TEST_DEVICE();
    auto model = dl::test::tiny_model(test::parity_spec("qwen35"));
    DriverOptions d = options();
    d.plan.n_ctx = 128;
    d.plan.sequences = 2;
    auto drv = ResidentDriver::create(model, d);
    ASSERT_TRUE(drv.ok()) << drv.reason();
    Executor& ex = **drv;
    ASSERT_EQ(ex.cache_use().total_rows, 4 * 64);
    const int64_t V = model->hp.n_vocab;
    std::vector<GenerationRequest> reqs;
    for (uint32_t i = 0; i < 5; ++i) {
        GenerationRequest r;
        r.prompt = dl::test::tiny_tokens(60, V, 500 + i);
        r.max_tokens = 40;
        r.ignore_eos = true;
        r.sampling.temperature = i % 2 ? 0.7f : 0.0f;
        r.sampling.seed = 60 + i;
        reqs.push_back(r);
    }
    SchedulerOptions o;
    o.parallel = 3;
    o.n_ctx = 128;
    o.token_budget = 16;  // prompts in chunks, side by side
    if (prefix_cache) {
        o.prefix_cache_bytes = 1u << 30;
        o.prefix_cache_host_bytes = 1u << 30;
    }
    std::vector<Outcome> got;
    SchedulerStats st;
    {
        Scheduler s(ex, o);
        got = submit_all(s, reqs);
        s.shutdown(true);  // the step thread's last step is over: its counts are final
        st = s.stats();
    }
    EXPECT_EQ(ex.cache_use().used_rows, 0) << "a block was never given back";
    if (prefix_cache) {
        EXPECT_GT(st.cache_host_bytes, 0u) << "no snapshot went to host memory for room";
    } else {
        EXPECT_GT(st.preempted, 0);
        EXPECT_EQ(st.kv_used_rows, 0);
    }
    EXPECT_EQ(st.kv_total_rows, 4 * 64);
    for (size_t i = 0; i < reqs.size(); ++i) {
        SCOPED_TRACE(::testing::Message() << "request " << i);
        EXPECT_EQ(got[i].done.finish, FinishReason::length) << got[i].done.error;
        EXPECT_EQ(got[i].tokens, solo_run(ex, reqs[i], 128));
    }
}

TEST(VulkanScheduler, AFullKvCacheSendsTheLastRequestBackToTheQueue) {
    check_full_kv_cache(false);
}
TEST(VulkanScheduler, AFullKvCacheMovesCachedPrefixesToTheHostFirst) {
    check_full_kv_cache(true);
}

}  // namespace
}  // namespace dl::vk
