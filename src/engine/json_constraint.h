// Output constrained to JSON (the API's response_format {"type": "json_object"}): before each
// sampled token, every token whose bytes cannot continue a JSON object (json_prefix.h) is masked
// out, and once the object is closed only the end of the turn may follow, so what the model
// writes parses. A thinking block, where the model writes one, comes first and is free.
#pragma once

#include <memory>
#include <span>

#include "engine/json_prefix.h"
#include "engine/token_constraint.h"
#include "engine/token_table.h"

namespace dl {

class JsonConstraint : public TokenConstraint {
  public:
    JsonConstraint(std::shared_ptr<const TokenTable> table, ThinkBlock think);
    int64_t mask(std::span<float> logits) override;
    void accept(int32_t token) override;

  private:
    bool allowed_special(int32_t id) const;
    std::shared_ptr<const TokenTable> table_;
    JsonPrefix json_;
    ThinkBlock think_;
    bool json_started_ = false;
};

}  // namespace dl
