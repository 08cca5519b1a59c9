// The sampler: the filter chain over a candidate list that is only ever partially sorted.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/error.h"

namespace dl {

namespace {

// Descending logit, ties broken by ascending id, so that partial selection is deterministic
// (a strict total order has exactly one top-m set and one sorted order).
struct ByLogitDesc {
    bool operator()(const TokenLogit& a, const TokenLogit& b) const {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    }
};

// Sorts the first m entries of c (the m largest, in order), knowing that the first `done` are
// already the `done` largest in order.
void sort_prefix(std::vector<TokenLogit>& c, size_t done, size_t m) {
    if (m < c.size()) std::nth_element(c.begin() + done, c.begin() + m, c.end(), ByLogitDesc{});
    std::sort(c.begin() + done, c.begin() + m, ByLogitDesc{});
}

float max_logit(const std::vector<TokenLogit>& c, bool sorted) {
    if (sorted) return c.front().logit;
    float m = -std::numeric_limits<float>::infinity();
    for (const TokenLogit& t : c) m = std::max(m, t.logit);
    return m;
}

}  // namespace

int32_t argmax(std::span<const float> logits) {
    if (logits.empty()) return -1;
    size_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i)
        if (logits[i] > logits[best]) best = i;
    return (int32_t)best;
}

Sampler::Sampler(SamplerParams params) : params_(params), rng_(params.seed) {}

void Sampler::reset() {
    history_.clear();
    rng_.seed(params_.seed);
}

void Sampler::accept(int32_t token) {
    if (params_.repeat_last_n == 0) return;
    history_.push_back(token);
    if (params_.repeat_last_n > 0)
        while ((int64_t)history_.size() > params_.repeat_last_n) history_.pop_front();
}

std::span<const TokenLogit> Sampler::last_candidates() const {
    return cand_;
}

double Sampler::uniform01() {
    // 53 random bits: the same value on every platform for the same seed (unlike
    // std::uniform_real_distribution, whose algorithm the standard leaves open).
    return (double)(rng_() >> 11) * 0x1.0p-53;
}

void Sampler::apply_repetition_penalty(std::vector<float>& logits) const {
    const float penalty = params_.repeat_penalty;
    const float presence = params_.presence_penalty, frequency = params_.frequency_penalty;
    if ((penalty == 1.0f && presence == 0.0f && frequency == 0.0f) || history_.empty()) return;
    // The repetition penalty and presence penalty apply once per distinct token, however often
    // it occurred; the frequency penalty once per occurrence. Dividing a positive logit and
    // multiplying a negative one both make the token less likely.
    std::unordered_map<int32_t, int32_t> count;
    for (int32_t t : history_)
        if (t >= 0 && (size_t)t < logits.size()) ++count[t];
    for (const auto& [t, n] : count) {
        float& l = logits[t];
        if (penalty != 1.0f) l = l > 0 ? l / penalty : l * penalty;
        l -= presence + frequency * (float)n;
    }
}

bool Sampler::penalizes() const {
    return params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f ||
           params_.frequency_penalty != 0.0f;
}

void Sampler::top_k(std::vector<TokenLogit>& c, int32_t k, bool& sorted) {
    if (k <= 0 || (size_t)k >= c.size()) return;
    if (!sorted) sort_prefix(c, 0, (size_t)k);
    c.resize((size_t)k);
    sorted = true;
}

void Sampler::top_k_of_row(std::span<const float> row, int32_t k, std::vector<TokenLogit>& c) {
    c.clear();
    if (k <= 0) return;
    const size_t n = std::min(row.size(), (size_t)k);
    c.reserve(n);
    // A heap whose front is the worst of the best kept so far (by ByLogitDesc). Ids rise along
    // the row, so a later equal logit ranks below every kept one: only a larger logit enters.
    for (size_t i = 0; i < row.size(); ++i) {
        if (c.size() < n) {
            c.push_back(TokenLogit{(int32_t)i, row[i]});
            std::push_heap(c.begin(), c.end(), ByLogitDesc{});
        } else if (row[i] > c.front().logit) {
            std::pop_heap(c.begin(), c.end(), ByLogitDesc{});
            c.back() = TokenLogit{(int32_t)i, row[i]};
            std::push_heap(c.begin(), c.end(), ByLogitDesc{});
        }
    }
    std::sort(c.begin(), c.end(), ByLogitDesc{});
}

void Sampler::top_p(std::vector<TokenLogit>& c, float p, bool& sorted) {
    if (p >= 1.0f || c.size() <= 1) return;
    // Normaliser over every candidate in one pass, then walk down the sorted prefix, sorting
    // more of it only when the mass found so far is not enough: the nucleus of a peaked
    // distribution is found after sorting a few dozen entries, not the whole vocabulary.
    const float mx = max_logit(c, sorted);
    double z = 0;
    for (const TokenLogit& t : c) z += std::exp((double)t.logit - mx);
    const double target = (double)std::max(p, 0.0f) * z;
    size_t done = sorted ? c.size() : 0, m = sorted ? c.size() : std::min<size_t>(c.size(), 64);
    double cum = 0;
    size_t i = 0;
    for (;;) {
        if (!sorted) sort_prefix(c, done, m);
        for (; i < m; ++i) {
            cum += std::exp((double)c[i].logit - mx);
            if (cum >= target) {
                c.resize(i + 1);
                sorted = true;
                return;
            }
        }
        if (m == c.size()) break;  // rounding: the whole list is the nucleus
        done = m;
        m = std::min(c.size(), m * 4);
    }
    sorted = true;
}

void Sampler::min_p(std::vector<TokenLogit>& c, float p, bool sorted) {
    if (p <= 0.0f || c.size() <= 1) return;
    // p_i >= p * p_max  <=>  logit_i >= logit_max + log(p): no softmax needed.
    const float threshold = max_logit(c, sorted) + std::log(std::min(p, 1.0f));
    auto keep = [&](const TokenLogit& t) { return t.logit >= threshold; };
    if (sorted) {
        size_t n = 1;
        while (n < c.size() && keep(c[n])) ++n;
        c.resize(n);
    } else {
        auto end = std::partition(c.begin(), c.end(), keep);
        c.erase(end, c.end());
    }
}

int32_t Sampler::sample(std::span<const float> logits) {
    if (logits.empty()) fail("cannot sample from an empty row of logits");
    // Every path checks, greedy included: argmax over NaN picks token 0 forever and says nothing.
    // (An OR of the comparisons vectorises; a branch per element would not.)
    bool nan = false;
    for (float x : logits) nan |= x != x;
    if (nan) fail("the logits hold NaN values (the model's weights or activations are broken)");
    std::span<const float> row = logits;
    if (penalizes() && !history_.empty()) {
        work_.assign(logits.begin(), logits.end());
        apply_repetition_penalty(work_);
        row = work_;
    }

    if (params_.temperature <= 0.0f) {
        int32_t best = argmax(row);
        cand_.assign(1, TokenLogit{best, row[best]});
        probs_.assign(1, 1.0f);
        return best;
    }

    bool sorted = false;
    const int32_t k = params_.top_k;
    if (k > 0 && (size_t)k * 16 <= row.size()) {
        top_k_of_row(row, k, cand_);
        sorted = true;
    } else {
        cand_.resize(row.size());
        for (size_t i = 0; i < row.size(); ++i) cand_[i] = TokenLogit{(int32_t)i, row[i]};
        top_k(cand_, k, sorted);
    }
    top_p(cand_, params_.top_p, sorted);
    min_p(cand_, params_.min_p, sorted);

    const double inv_t = 1.0 / params_.temperature;
    const float mx = max_logit(cand_, sorted);
    probs_.resize(cand_.size());
    double z = 0;
    for (size_t i = 0; i < cand_.size(); ++i) {
        probs_[i] = (float)std::exp(((double)cand_[i].logit - mx) * inv_t);
        z += probs_[i];
    }
    if (!(z > 0) || !std::isfinite(z)) fail("the logits hold NaN or infinite values");
    const double u = uniform01() * z;
    double cum = 0;
    // Rounding may leave u past the last sum: the last candidate that can be drawn, never one of
    // probability 0 (a token a constraint masked to -infinity).
    size_t pick = cand_.size() - 1;
    while (pick > 0 && probs_[pick] == 0) --pick;
    for (size_t i = 0; i < cand_.size(); ++i) {
        cum += probs_[i];
        if (u < cum) {
            pick = i;
            break;
        }
    }
    for (float& q : probs_) q = (float)(q / z);
    return cand_[pick].id;
}

float log_probability(std::span<const float> row, int32_t chosen, int32_t n,
                      std::vector<TokenLogprob>& top) {
    float mx = -INFINITY;
    for (float x : row) mx = std::max(mx, x);
    double sum = 0;
    for (float x : row) sum += std::exp(double(x) - mx);
    const double lse = mx + std::log(sum);
    top.clear();
    if (n > 0) {
        std::vector<int32_t> ids(row.size());
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = (int32_t)i;
        const size_t k = std::min<size_t>((size_t)n, ids.size());
        std::partial_sort(ids.begin(), ids.begin() + (ptrdiff_t)k, ids.end(),
                          [&](int32_t a, int32_t b) {
                              return row[(size_t)a] > row[(size_t)b] ||
                                     (row[(size_t)a] == row[(size_t)b] && a < b);
                          });
        for (size_t i = 0; i < k && std::isfinite(row[(size_t)ids[i]]); ++i)
            top.push_back({ids[i], static_cast<float>(row[(size_t)ids[i]] - lse)});
    }
    return static_cast<float>(row[(size_t)chosen] - lse);
}

}  // namespace dl
