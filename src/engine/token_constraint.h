// A rule on which tokens a request may generate next, applied on the host to the step's logits
// before the request's own sampler draws (json_constraint.h is one).
#pragma once

#include <cstdint>
#include <span>

namespace dl {

class TokenConstraint {
  public:
    virtual ~TokenConstraint() = default;
    // Sets the logits of the tokens that may not come next to -infinity; returns how many may.
    virtual int64_t mask(std::span<float> logits) = 0;
    // The token that was sampled (one mask() allowed).
    virtual void accept(int32_t token) = 0;
};

}  // namespace dl
