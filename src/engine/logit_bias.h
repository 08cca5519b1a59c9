// OpenAI's logit_bias: a number from -100 to 100 added to a token's logit before the request's
// sampler draws (-100 rules the token out, as OpenAI and llama-server read it), then the request's
// other rule on its output, if any.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "engine/token_constraint.h"

namespace dl {

class LogitBias : public TokenConstraint {
  public:
    LogitBias(std::vector<std::pair<int32_t, float>> bias, std::shared_ptr<TokenConstraint> inner);
    int64_t mask(std::span<float> logits) override;
    void accept(int32_t token) override;

  private:
    std::vector<std::pair<int32_t, float>> bias_;
    std::shared_ptr<TokenConstraint> inner_;
};

}  // namespace dl
