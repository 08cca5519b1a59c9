// The sampler against exact math: argmax by a plain scan, nuclei and min-p sets from a full sort
// of hand-made or random distributions, draw frequencies against renormalised probabilities.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "core/error.h"
#include "engine/sampler.h"

using namespace dl;

namespace {

std::vector<float> random_logits(size_t n, uint32_t seed, float scale = 3.0f) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(g);
    return v;
}

std::vector<float> log_of(std::vector<double> p) {
    std::vector<float> l;
    for (double x : p) l.push_back((float)std::log(x));
    return l;
}

std::set<int32_t> ids(std::span<const TokenLogit> c) {
    std::set<int32_t> s;
    for (auto& t : c) s.insert(t.id);
    return s;
}

std::vector<TokenLogit> candidates(const std::vector<float>& l) {
    std::vector<TokenLogit> c;
    for (size_t i = 0; i < l.size(); ++i) c.push_back({(int32_t)i, l[i]});
    return c;
}

// The nucleus by the definition: sort every probability, smallest prefix with mass >= p.
std::set<int32_t> reference_nucleus(const std::vector<float>& l, double p) {
    double mx = *std::max_element(l.begin(), l.end()), z = 0;
    for (float x : l) z += std::exp(x - mx);
    std::vector<int32_t> order(l.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
    std::set<int32_t> s;
    double cum = 0;
    for (int32_t i : order) {
        s.insert(i);
        cum += std::exp(l[i] - mx) / z;
        if (cum >= p) break;
    }
    return s;
}

SamplerParams plain(float temp) {
    SamplerParams p;
    p.temperature = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    return p;
}

}  // namespace

// Log-probabilities against a hand-made distribution: logits ln 1, ln 2, ln 3 and a token a
// constraint ruled out; the best first, a tie to the lower id, the ruled-out token never.
TEST(LogProbability, OfAHandMadeDistribution) {
    const std::vector<float> row = {std::log(1.f), std::log(2.f), std::log(3.f), -INFINITY};
    std::vector<TokenLogprob> top;
    EXPECT_NEAR(log_probability(row, 1, 10, top), std::log(2.0 / 6), 1e-6);
    ASSERT_EQ(top.size(), 3u);
    EXPECT_EQ(top[0].token, 2);
    EXPECT_NEAR(top[0].logprob, std::log(3.0 / 6), 1e-6);
    EXPECT_EQ(top[1].token, 1);
    EXPECT_EQ(top[2].token, 0);
    EXPECT_NEAR(top[2].logprob, std::log(1.0 / 6), 1e-6);
    EXPECT_NEAR(log_probability(row, 2, 0, top), std::log(3.0 / 6), 1e-6);
    EXPECT_TRUE(top.empty());
    const std::vector<float> tied = {1.f, 1.f, 0.f};
    log_probability(tied, 0, 1, top);
    ASSERT_EQ(top.size(), 1u);
    EXPECT_EQ(top[0].token, 0);
}

TEST(Sampler, GreedyIsArgmaxOverALargeVocabulary) {
    for (uint32_t seed = 1; seed <= 5; ++seed) {
        auto l = random_logits(248320, seed);
        int32_t want = (int32_t)(std::max_element(l.begin(), l.end()) - l.begin());
        Sampler s(plain(0.0f));
        EXPECT_EQ(s.sample(l), want);
    }
}

TEST(Sampler, GreedyTakesTheFirstOfTiedMaxima) {
    std::vector<float> l = {0.f, 2.f, 5.f, 5.f, 1.f};
    Sampler s(plain(0.0f));
    EXPECT_EQ(s.sample(l), 2);
    EXPECT_EQ(argmax(l), 2);
    EXPECT_EQ(argmax(std::span<const float>{}), -1);
}

TEST(Sampler, TopKOneIsGreedyWhateverTheSeed) {
    auto l = random_logits(150000, 7);
    int32_t want = (int32_t)(std::max_element(l.begin(), l.end()) - l.begin());
    for (uint64_t seed = 0; seed < 20; ++seed) {
        SamplerParams p = plain(1.5f);
        p.top_k = 1;
        p.seed = seed;
        Sampler s(p);
        EXPECT_EQ(s.sample(l), want);
    }
}

TEST(Sampler, TopKKeepsExactlyTheKLargestInOrder) {
    auto l = random_logits(200000, 3);
    std::vector<int32_t> order(l.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
    for (int32_t k : {1, 2, 40, 1000}) {
        auto c = candidates(l);
        bool sorted = false;
        Sampler::top_k(c, k, sorted);
        ASSERT_EQ((int32_t)c.size(), k);
        EXPECT_TRUE(sorted);
        for (int32_t i = 0; i < k; ++i) EXPECT_EQ(c[i].id, order[i]) << "k=" << k << " i=" << i;
    }
    auto c = candidates(l);
    bool sorted = false;
    Sampler::top_k(c, 0, sorted);  // off
    EXPECT_EQ(c.size(), l.size());
    EXPECT_FALSE(sorted);
}

// The one-pass form against a full sort by (logit descending, id ascending), on rows with many
// ties (logits in steps of 1/2) and ruled-out tokens (-infinity), at the ends of the row too.
TEST(Sampler, TopKOfARowIsTheKLargestInOrderTiesToTheLowerId) {
    for (uint32_t seed : {1u, 2u, 3u}) {
        auto l = random_logits(100000, seed);
        for (float& x : l) x = std::round(x * 2) / 2;
        for (size_t i = 0; i < l.size(); i += 7) l[i] = -INFINITY;
        l.back() = 100.0f;  // the best is the last id
        l.front() = 100.0f;
        std::vector<int32_t> order(l.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
        for (int32_t k : {1, 2, 3, 40, 1000, 6250}) {
            std::vector<TokenLogit> c;
            Sampler::top_k_of_row(l, k, c);
            ASSERT_EQ((int32_t)c.size(), k);
            for (int32_t i = 0; i < k; ++i) {
                ASSERT_EQ(c[i].id, order[i]) << "seed=" << seed << " k=" << k << " i=" << i;
                ASSERT_EQ(c[i].logit, l[order[i]]);
            }
        }
    }
    std::vector<TokenLogit> c;
    Sampler::top_k_of_row(std::vector<float>{1.0f, 3.0f}, 5, c);  // k past the row: all of it
    ASSERT_EQ(c.size(), 2u);
    EXPECT_EQ(c[0].id, 1);
}

// sample() takes the one-pass form for a small k: the same candidates, in the same order, as the
// filters chained over the whole row (the draw depends on nothing else).
TEST(Sampler, SampleWithASmallTopKKeepsWhatTheWholeChainKeeps) {
    auto l = random_logits(200000, 21, 2.0f);
    for (float& x : l) x = std::round(x * 4) / 4;
    for (int32_t k : {5, 40, 12500}) {
        SamplerParams p;
        p.temperature = 0.7f;
        p.top_k = k;
        p.top_p = 0.9f;
        p.min_p = 0.01f;
        p.seed = 99;
        Sampler s(p);
        s.sample(l);
        auto c = candidates(l);
        bool sorted = false;
        Sampler::top_k(c, k, sorted);
        Sampler::top_p(c, p.top_p, sorted);
        Sampler::min_p(c, p.min_p, sorted);
        std::span<const TokenLogit> got = s.last_candidates();
        ASSERT_EQ(got.size(), c.size()) << "k=" << k;
        for (size_t i = 0; i < c.size(); ++i) {
            EXPECT_EQ(got[i].id, c[i].id) << "k=" << k << " i=" << i;
            EXPECT_EQ(got[i].logit, c[i].logit);
        }
    }
}

TEST(Sampler, TopPOnAHandMadeDistribution) {
    // p = 1/2, 1/4, 1/8, 1/16, 1/16 in shuffled order
    auto l = log_of({0.0625, 0.25, 0.5, 0.0625, 0.125});
    struct Case {
        float p;
        std::set<int32_t> keep;
    } cases[] = {{0.3f, {2}}, {0.7f, {2, 1}}, {0.8f, {2, 1, 4}}, {0.9f, {2, 1, 4, 0, 3}}};
    for (auto& cs : cases) {
        auto c = candidates(l);
        bool sorted = false;
        Sampler::top_p(c, cs.p, sorted);
        // 0.9 needs 0.9375, which 1/16 ties resolve by id: id 0 before id 3.
        if (cs.p == 0.9f) cs.keep = {2, 1, 4, 0};
        EXPECT_EQ(ids(c), cs.keep) << "top_p=" << cs.p;
        EXPECT_TRUE(sorted);
    }
}

TEST(Sampler, TopPMatchesAFullSortOnLargeFlatAndPeakedRows) {
    // A flat row makes the nucleus hold most of the vocabulary (the partial sort must widen
    // many times); a peaked one a handful of entries.
    for (float scale : {0.05f, 1.0f, 6.0f}) {
        auto l = random_logits(100000, 11, scale);
        for (float p : {0.1f, 0.5f, 0.95f}) {
            auto c = candidates(l);
            bool sorted = false;
            Sampler::top_p(c, p, sorted);
            EXPECT_EQ(ids(c), reference_nucleus(l, p)) << "scale=" << scale << " p=" << p;
            for (size_t i = 1; i < c.size(); ++i) ASSERT_GE(c[i - 1].logit, c[i].logit);
        }
    }
}

TEST(Sampler, MinPKeepsWhatReachesTheFractionOfTheTop) {
    auto l = log_of({0.0625, 0.25, 0.5, 0.0625, 0.125});
    for (bool presorted : {false, true}) {
        for (auto [mp, keep] : std::vector<std::pair<float, std::set<int32_t>>>{
                 {0.2f, {2, 1, 4}},   // >= 0.1
                 {0.13f, {2, 1, 4}},  // >= 0.065: the 1/16 entries fall out
                 {0.12f, {0, 1, 2, 3, 4}},
                 {0.6f, {2}},
                 {1.0f, {2}}}) {
            auto c = candidates(l);
            bool sorted = false;
            if (presorted) {
                std::sort(c.begin(), c.end(), [](auto a, auto b) { return a.logit > b.logit; });
                sorted = true;
            }
            Sampler::min_p(c, mp, sorted);
            EXPECT_EQ(ids(c), keep) << "min_p=" << mp << " presorted=" << presorted;
        }
    }
}

TEST(Sampler, DrawsFollowTheRenormalisedNucleus) {
    // top_p 0.7 keeps 1/2 and 1/4: renormalised 2/3 and 1/3; nothing else may ever come out.
    auto l = log_of({0.0625, 0.25, 0.5, 0.0625, 0.125});
    SamplerParams p = plain(1.0f);
    p.top_p = 0.7f;
    p.seed = 42;
    Sampler s(p);
    std::map<int32_t, int> count;
    const int n = 30000;
    for (int i = 0; i < n; ++i) count[s.sample(l)]++;
    EXPECT_EQ(count.size(), 2u);
    double f2 = count[2] / (double)n;
    double sigma = std::sqrt(2.0 / 9.0 / n);
    EXPECT_NEAR(f2, 2.0 / 3.0, 5 * sigma);
    auto probs = s.last_probabilities();
    ASSERT_EQ(probs.size(), 2u);
    EXPECT_NEAR(probs[0], 2.0 / 3.0, 1e-6);
    EXPECT_NEAR(probs[1], 1.0 / 3.0, 1e-6);
}

TEST(Sampler, TemperatureReshapesAsPowerOfTheProbabilities) {
    // At temperature T the survivors' probabilities are p^(1/T) renormalised.
    std::vector<double> p = {0.5, 0.3, 0.2};
    auto l = log_of(p);
    for (float t : {0.5f, 2.0f}) {
        Sampler s(plain(t));
        s.sample(l);
        auto c = s.last_candidates();
        auto q = s.last_probabilities();
        double z = 0;
        for (double x : p) z += std::pow(x, 1.0 / t);
        ASSERT_EQ(c.size(), 3u);
        for (size_t i = 0; i < c.size(); ++i)
            EXPECT_NEAR(q[i], std::pow(p[c[i].id], 1.0 / t) / z, 1e-6) << "T=" << t;
    }
}

TEST(Sampler, TemperatureLimits) {
    auto l = random_logits(50000, 5);
    int32_t want = argmax(l);
    Sampler cold(plain(1e-4f));
    for (int i = 0; i < 200; ++i) EXPECT_EQ(cold.sample(l), want);

    // Very hot: close to uniform over the (unfiltered) candidates.
    std::vector<float> four = {3.f, 1.f, 0.f, -2.f};
    SamplerParams hp = plain(1e4f);
    hp.seed = 9;
    Sampler hot(hp);
    std::map<int32_t, int> count;
    const int n = 20000;
    for (int i = 0; i < n; ++i) count[hot.sample(four)]++;
    double sigma = std::sqrt(0.25 * 0.75 / n);
    for (int32_t id = 0; id < 4; ++id) EXPECT_NEAR(count[id] / (double)n, 0.25, 5 * sigma);
}

TEST(Sampler, SameSeedSameTokensOtherSeedOtherTokens) {
    auto l = random_logits(150000, 2, 0.5f);  // flat enough that draws vary
    SamplerParams p;                          // the default chain
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    auto run = [&](uint64_t seed) {
        p.seed = seed;
        Sampler s(p);
        std::vector<int32_t> out;
        for (int i = 0; i < 50; ++i) out.push_back(s.sample(l));
        return out;
    };
    EXPECT_EQ(run(123), run(123));
    EXPECT_NE(run(123), run(124));

    p.seed = 5;
    Sampler s(p);
    auto first = s.sample(l);
    s.sample(l);
    s.reset();
    EXPECT_EQ(s.sample(l), first);
}

TEST(Sampler, RepetitionPenaltyChangesOnlyTheRecentTokens) {
    SamplerParams p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 3;
    Sampler s(p);
    for (int32_t t : {7, 3, 5, 3}) s.accept(t);  // the window holds 3, 5, 3: 7 has left it
    std::vector<float> l = {1.f, 1.f, 1.f, 4.f, 1.f, -2.f, 1.f, 6.f};
    std::vector<float> got = l;
    s.apply_repetition_penalty(got);
    std::vector<float> want = {1.f, 1.f, 1.f, 2.f, 1.f, -4.f, 1.f, 6.f};  // 3 once, not twice
    EXPECT_EQ(got, want);

    // Through sample(): the penalty moves the argmax away from a repeated token.
    std::vector<float> row = {5.f, 4.f};
    SamplerParams q = plain(0.0f);
    q.repeat_penalty = 1.5f;
    Sampler r(q);
    EXPECT_EQ(r.sample(row), 0);
    r.accept(0);
    EXPECT_EQ(r.sample(row), 1);  // 5 / 1.5 < 4
    EXPECT_EQ(row[0], 5.f);       // the caller's row is left alone

    SamplerParams off = plain(0.0f);
    off.repeat_penalty = 2.0f;
    off.repeat_last_n = 0;
    Sampler o(off);
    o.accept(0);
    EXPECT_EQ(o.sample(row), 0);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesSubtractAsOpenAIDefinesThem) {
    SamplerParams p = plain(0.0f);
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    p.repeat_last_n = 4;
    Sampler s(p);
    for (int32_t t : {1, 2, 3, 2, 2}) s.accept(t);  // the window holds 2, 3, 2, 2
    std::vector<float> got = {1.f, 1.f, 1.f, 1.f};
    s.apply_repetition_penalty(got);
    std::vector<float> want = {1.f, 1.f, 1.f - 0.5f - 0.75f, 1.f - 0.5f - 0.25f};
    EXPECT_EQ(got, want);

    // Through sample(): a repeated token loses the argmax; a negative penalty favours it.
    std::vector<float> row = {5.f, 4.5f};
    SamplerParams q = plain(0.0f);
    q.frequency_penalty = 1.0f;
    Sampler r(q);
    r.accept(0);
    EXPECT_EQ(r.sample(row), 1);
    q.frequency_penalty = 0.0f;
    q.presence_penalty = -1.0f;
    Sampler f(q);
    f.accept(1);
    EXPECT_EQ(f.sample(row), 1);
}

TEST(Sampler, BadRowsAreErrorsNotCrashes) {
    Sampler s(plain(1.0f));
    EXPECT_THROW(s.sample(std::span<const float>{}), Error);
    std::vector<float> nan(4, std::nanf(""));
    EXPECT_THROW(s.sample(nan), Error);
}

// One NaN among finite logits: greedy picked token 0 forever (argmax never prefers a NaN, and
// nothing said so); every path must refuse it.
TEST(Sampler, OneNanIsAnErrorOnEveryPath) {
    std::vector<float> row(1000);
    for (size_t i = 0; i < row.size(); ++i) row[i] = (float)i * 0.001f;
    row[500] = std::nanf("");
    SamplerParams greedy = plain(0.0f);
    SamplerParams top_k0 = plain(1.0f);
    top_k0.top_k = 0;
    SamplerParams top_k40 = plain(1.0f);
    top_k40.top_k = 40;
    SamplerParams penalised = plain(0.0f);
    penalised.repeat_penalty = 1.3f;
    for (const SamplerParams& p : {greedy, top_k0, top_k40, penalised}) {
        Sampler s(p);
        s.accept(3);
        SCOPED_TRACE(testing::Message() << "temperature " << p.temperature << " top_k " << p.top_k
                                        << " penalty " << p.repeat_penalty);
        EXPECT_THROW(s.sample(row), Error);
    }
}
