// Choosing the next token from a row of logits: greedy, or a chain of filters (repetition
// penalty, top-k, top-p, min-p) followed by temperature and a draw from a seeded generator.
// Built for vocabularies of 150k-250k entries: one copy of the row, linear scans, and partial
// selection (nth_element) instead of a full sort per token; no allocation after the first call.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <vector>

#include "executor/sampler_params.h"

namespace dl {

// One entry of the candidate list the filters work on.
struct TokenLogit {
    int32_t id;
    float logit;
};

// The filters run in this order, each on the model's own distribution (temperature 1):
//   repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw.
// Temperature comes last so that it only reshapes the choice among the survivors (the order
// llama.cpp users know); greedy skips the filters since none of them can remove the argmax.
class Sampler {
  public:
    explicit Sampler(SamplerParams params = {});

    const SamplerParams& params() const { return params_; }

    // Picks a token from n_vocab logits. Does not record it: call accept() with the token that
    // is actually fed to the model (the generate loop does both).
    int32_t sample(std::span<const float> logits);
    // The uniform number sample() would draw for its next pick (0 without a draw when greedy),
    // for executors that sample where the logits are: the generator advances exactly as it would.
    double draw() { return params_.temperature > 0.0f ? uniform01() : 0.0; }
    // Records a token in the history the repetition penalty looks at (prompt tokens too).
    void accept(int32_t token);
    // Forgets the history and reseeds the generator with params().seed.
    void reset();

    // The candidates that survived the filters of the last sample() call, with their
    // probabilities after temperature (for tests and for tools that show alternatives).
    std::span<const TokenLogit> last_candidates() const;
    std::span<const float> last_probabilities() const { return probs_; }

    // The building blocks, public so that tests can hold each against exact math. They work on
    // the candidate list `c`; `sorted` says whether c is sorted by descending logit and is
    // updated when a step sorts it.
    // The repetition, presence and frequency penalties over the recent tokens.
    void apply_repetition_penalty(std::vector<float>& logits) const;
    bool penalizes() const;  // any of the three is on
    static void top_k(std::vector<TokenLogit>& c, int32_t k, bool& sorted);
    // top_k straight from a row, in one pass that keeps the k best seen (for k small beside the
    // row: a vocabulary of 248k took ~2.5 ms as a candidate list partly sorted, ~0.25 ms so): c
    // gets the same k candidates, sorted, as top_k over the whole row would leave.
    static void top_k_of_row(std::span<const float> row, int32_t k, std::vector<TokenLogit>& c);
    static void top_p(std::vector<TokenLogit>& c, float p, bool& sorted);
    static void min_p(std::vector<TokenLogit>& c, float p, bool sorted);

  private:
    SamplerParams params_;
    std::mt19937_64 rng_;
    std::deque<int32_t> history_;
    std::vector<float> work_;       // the penalised copy of the row
    std::vector<TokenLogit> cand_;  // the candidate list
    std::vector<float> probs_;      // probabilities of cand_ after temperature

    double uniform01();
};

// Index of the largest value (the first one on ties); -1 for an empty row.
int32_t argmax(std::span<const float> logits);

struct TokenLogprob {
    int32_t token = -1;
    float logprob = 0;
};
// The log-probability of token `chosen` in the log softmax of one row of logits (the model's own
// distribution, before the sampling filters, as OpenAI reports logprobs), and into `top` the n
// most likely tokens with theirs, best first (the lower id on a tie), leaving out tokens a
// constraint ruled out (-infinity).
float log_probability(std::span<const float> row, int32_t chosen, int32_t n,
                      std::vector<TokenLogprob>& top);

}  // namespace dl
