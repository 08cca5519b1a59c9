// Sampling on the device (shaders/sample.comp) against the host sampler (engine/sampler.h): for
// the same logits, parameters and seed both must choose the same token. The device sums in
// float where the host sums in double, so a draw that lands within rounding of a boundary
// between two candidates may go either way: such a mismatch must be one of the host's
// candidates with u at its boundary, and mismatches must stay rare.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "cpu/chain.h"
#include "engine/sampler.h"
#include "model/tiny_model.h"
#include "vk_test.h"
#include "vulkan/driver.h"

namespace dl::vk {
namespace {

struct Params {
    float temperature;
    int32_t top_k;
    float top_p, min_p;
};

TEST(DeviceSampling, ChoosesAsTheHostSampler) {
    VK_TEST_DEVICE();
    const uint32_t n = 5003;  // odd, not a multiple of the workgroup
    const Params cases[] = {{0.f, 40, 0.95f, 0.05f},  {0.8f, 40, 0.95f, 0.05f},
                            {1.0f, 1, 1.0f, 0.0f},    {1.5f, 256, 1.0f, 0.0f},
                            {0.7f, 64, 0.5f, 0.0f},   {1.0f, 200, 0.9f, 0.1f},
                            {2.0f, 17, 0.99f, 0.01f}, {0.3f, 256, 0.8f, 0.0f}};
    std::mt19937 rng(11);
    int trials = 0, mismatches = 0;
    for (const Params& c : cases) {
        for (int trial = 0; trial < 12; ++trial) {
            // Peaked and flat rows, with a few exact ties at the top.
            std::normal_distribution<float> nd(0.f, trial % 2 ? 1.f : 4.f);
            std::vector<float> logits(n);
            for (float& x : logits) x = nd(rng);
            logits[rng() % n] = logits[rng() % n];
            // Every third row: the best logit repeated far apart (other chunks of the first
            // pass), so the order among equals decides.
            if (trial % 3 == 0) {
                const float best = *std::max_element(logits.begin(), logits.end());
                for (int j = 0; j < 6; ++j) logits[rng() % n] = best;
            }
            SamplerParams sp;
            sp.temperature = c.temperature;
            sp.top_k = c.top_k;
            sp.top_p = c.top_p;
            sp.min_p = c.min_p;
            sp.seed = 1000 + trial;
            Sampler host(sp);
            const int32_t want = host.sample(logits);
            Sampler twin(sp);
            const double u = twin.draw();

            Buffer lb = test::to_device(dev, logits);
            std::vector<uint32_t> tokv(16, 0);
            tokv[2] = 0xdeadbeef;
            tokv[3] = test::bits(c.temperature);
            tokv[4] = (uint32_t)c.top_k;
            tokv[5] = test::bits(c.top_p);
            tokv[6] = test::bits(c.min_p);
            tokv[7] = test::bits((float)u);
            // One workgroup over every logit (no scratch), then the two passes over chunks of
            // 256 (20 chunks, fewer logits than top_k), 1024 and 4096 (the last one short).
            for (uint32_t chunk : {0u, 256u, 1024u, 4096u}) {
                Buffer tb = test::to_device(dev, tokv);
                Buffer scratch = test::poisoned(dev, Kernels::sample_scratch_bytes(n) / 4);
                test::Scoped chunk_scope(K.tuning.sample_chunk, chunk ? chunk : 4096u);
                test::run(dev, [&](CommandList& cl) {
                    K.sample(cl, view(lb), 0, n, view(tb), 2, 3, chunk ? view(scratch) : View{});
                });
                const int32_t got = (int32_t)test::from_device<uint32_t>(dev, tb, 16)[2];
                ++trials;
                if (got == want) continue;
                ++mismatches;
                ASSERT_GT(c.temperature, 0.f)
                    << "greedy must match exactly (chunk " << chunk << ")";
                // The device's token must be a host candidate adjacent to the host's pick, with u
                // within rounding of the cumulative boundary between them.
                auto cand = host.last_candidates();
                auto probs = host.last_probabilities();
                double cum = 0;
                size_t wi = cand.size(), gi = cand.size();
                double boundary = -1;
                for (size_t i = 0; i < cand.size(); ++i) {
                    if (cand[i].id == want) wi = i;
                    if (cand[i].id == got) gi = i;
                    cum += probs[i];
                    if (i + 1 == std::min(wi, gi) + 1 && wi != gi) boundary = cum;
                }
                ASSERT_LT(gi, cand.size()) << "device chose " << got << ", not a host candidate";
                ASSERT_EQ(std::max(wi, gi) - std::min(wi, gi), 1u) << "not neighbours";
                EXPECT_NEAR(u, boundary, 1e-4) << "u is not at the boundary";
            }
        }
    }
    std::printf("[ sampling ] %d of %d draws differ from the host (boundary rounding)\n",
                mismatches, trials);
    EXPECT_LE(mismatches * 20, trials);
}

// The rows of a batch in one dispatch a pass (SampleRows): four rows of their own logits and
// parameters (greedy and sampled, different top-k and draws), their logits, words and scratch a
// stride apart (the gaps poisoned). Each row's token must be the one the same row chooses alone
// (the same arithmetic), and a greedy row's the host's argmax; one workgroup a row, and the two
// passes over chunks.
TEST(DeviceSampling, EveryBatchRowInOneDispatch) {
    VK_TEST_DEVICE();
    const uint32_t n = 5003, rows = 4, logits_row = n + 7, tok_row = 16 + 3;
    const Params cases[rows] = {
        {0.f, 40, 0.95f, 0.05f}, {0.8f, 40, 0.95f, 0.05f}, {1.5f, 256, 1.0f, 0.0f}, {0.f, 1, 1, 0}};
    std::mt19937 rng(23);
    std::vector<float> logits((size_t)rows * logits_row);
    for (float& x : logits) std::memcpy(&x, &test::kPoison, 4);
    std::vector<uint32_t> tokv((size_t)rows * tok_row, 0);
    for (uint32_t r = 0; r < rows; ++r) {
        std::normal_distribution<float> nd(0.f, 1.f + 2.f * r);
        for (uint32_t i = 0; i < n; ++i) logits[(size_t)r * logits_row + i] = nd(rng);
        uint32_t* w = &tokv[(size_t)r * tok_row];
        w[2] = 0xdeadbeef;
        w[3] = test::bits(cases[r].temperature);
        w[4] = (uint32_t)cases[r].top_k;
        w[5] = test::bits(cases[r].top_p);
        w[6] = test::bits(cases[r].min_p);
        w[7] = test::bits(0.1f + 0.25f * r);
    }
    Buffer lb = test::to_device(dev, logits);
    const uint64_t scratch_row = (Kernels::sample_scratch_bytes(n) + 8 + 7) / 8 * 8;
    for (uint32_t chunk : {0u, 256u, 4096u}) {
        test::Scoped chunk_scope(K.tuning.sample_chunk, chunk ? chunk : 4096u);
        Buffer tb = test::to_device(dev, tokv);
        Buffer scratch = test::poisoned(dev, rows * scratch_row / 4);
        test::run(dev, [&](CommandList& cl) {
            K.sample(cl, view(lb), 0, n, view(tb), 2, 3, chunk ? view(scratch) : View{},
                     {rows, tok_row, logits_row, scratch_row});
        });
        const auto got = test::from_device<uint32_t>(dev, tb, rows * tok_row);
        for (uint32_t r = 0; r < rows; ++r) {
            std::vector<float> row(logits.begin() + (size_t)r * logits_row,
                                   logits.begin() + (size_t)r * logits_row + n);
            Buffer one = test::to_device(dev, row);
            std::vector<uint32_t> w(tokv.begin() + (size_t)r * tok_row,
                                    tokv.begin() + (size_t)(r + 1) * tok_row);
            Buffer ob = test::to_device(dev, w);
            Buffer os = test::poisoned(dev, Kernels::sample_scratch_bytes(n) / 4);
            test::run(dev, [&](CommandList& cl) {
                K.sample(cl, view(one), 0, n, view(ob), 2, 3, chunk ? view(os) : View{});
            });
            const uint32_t alone = test::from_device<uint32_t>(dev, ob, tok_row)[2];
            EXPECT_EQ(got[(size_t)r * tok_row + 2], alone) << "row " << r << " chunk " << chunk;
            if (cases[r].temperature <= 0.f) {
                EXPECT_EQ(alone, (uint32_t)(std::max_element(row.begin(), row.end()) - row.begin()))
                    << "row " << r;
            }
        }
    }
}

// One NaN among the logits gives no token (0xffffffff, which the driver turns into an error) on
// every path: greedy, sampled, one workgroup or the two passes over chunks. Greedy used to pass
// over the NaN and return a token as if nothing were wrong.
TEST(DeviceSampling, NanLogitsGiveNoToken) {
    VK_TEST_DEVICE();
    const uint32_t n = 5003;
    std::vector<float> logits(n);
    for (uint32_t i = 0; i < n; ++i) logits[i] = (float)(i % 97) * 0.01f;
    logits[3001] = std::nanf("");
    const Params cases[] = {{0.f, 40, 0.95f, 0.05f}, {0.8f, 40, 0.95f, 0.05f}, {1.0f, 1, 1.f, 0.f}};
    for (const Params& c : cases) {
        std::vector<uint32_t> tokv(16, 0);
        tokv[2] = 0xdeadbeef;
        tokv[3] = test::bits(c.temperature);
        tokv[4] = (uint32_t)c.top_k;
        tokv[5] = test::bits(c.top_p);
        tokv[6] = test::bits(c.min_p);
        tokv[7] = test::bits(0.5f);
        Buffer lb = test::to_device(dev, logits);
        for (uint32_t chunk : {0u, 256u, 4096u}) {
            Buffer tb = test::to_device(dev, tokv);
            Buffer scratch = test::poisoned(dev, Kernels::sample_scratch_bytes(n) / 4);
            test::Scoped chunk_scope(K.tuning.sample_chunk, chunk ? chunk : 4096u);
            test::run(dev, [&](CommandList& cl) {
                K.sample(cl, view(lb), 0, n, view(tb), 2, 3, chunk ? view(scratch) : View{});
            });
            EXPECT_EQ(test::from_device<uint32_t>(dev, tb, 16)[2], 0xffffffffu)
                << "temperature " << c.temperature << " top_k " << c.top_k << " chunk " << chunk;
        }
    }
}

// Through the driver: a session decoding with device sampling chooses as a twin session that
// returns its logits and samples them on the host, token after token.
TEST(DeviceSampling, DriverDecodeSampleMatchesHostSampling) {
    VK_TEST_DEVICE();
    dl::test::TinySpec spec;
    spec.residual_gain = 0.5;
    auto model = dl::test::tiny_model(spec);
    DriverOptions o;
    o.device.robust = ::dl::vk::test::robust();
    o.plan.n_ctx = 64;
    o.plan.sequences = 4;  // the host's sessions and the device's
    auto drv = ResidentDriver::create(model, o);
    ASSERT_TRUE(drv.ok()) << drv.reason();
    ResidentDriver& d = **drv;
    SamplerParams sp;
    sp.temperature = 0.9f;
    sp.top_k = 20;
    sp.top_p = 0.9f;
    sp.min_p = 0.02f;
    sp.seed = 7;
    ASSERT_TRUE(d.samples_on_device(sp));
    SamplerParams pen = sp;
    pen.repeat_penalty = 1.1f;
    EXPECT_FALSE(d.samples_on_device(pen));
    EXPECT_THROW(d.decode_sample(*d.new_session(8), 1, pen, 0.5), Error);

    auto a = d.new_session(64), b = d.new_session(64);
    Sampler host(sp), dev_draws(sp);
    std::vector<float> lg;
    int32_t tok = 5, differ = 0;
    for (int i = 0; i < 30; ++i) {
        d.decode(*a, tok, lg);
        const int32_t want = host.sample(lg);
        const int32_t got = d.decode_sample(*b, tok, sp, dev_draws.draw());
        differ += got != want;
        tok = want;  // both sessions go on with the host's choice
    }
    EXPECT_LE(differ, 1) << "device and host sampling parted more than rounding allows";
    // Greedy through the same path is the argmax.
    SamplerParams greedy;
    greedy.temperature = 0.f;
    auto c = d.new_session(8), e = d.new_session(8);
    d.decode(*c, 3, lg);
    const int32_t host_best = (int32_t)(std::max_element(lg.begin(), lg.end()) - lg.begin());
    EXPECT_EQ(d.decode_sample(*e, 3, greedy, 0.0), host_best);
}

}  // namespace
}  // namespace dl::vk
