// Output that must open with a given text, after a thinking block where the model writes one:
// until the text is written, only tokens that continue it (or complete it and go on) may come,
// never the end of the turn; then any. A forced tool call (tool_choice "required" or a named
// function) is its opening in the model's own syntax.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "engine/token_constraint.h"
#include "engine/token_table.h"

namespace dl {

class PrefixConstraint : public TokenConstraint {
  public:
    PrefixConstraint(std::shared_ptr<const TokenTable> table, ThinkBlock think,
                     std::string opening);
    int64_t mask(std::span<float> logits) override;
    void accept(int32_t token) override;

  private:
    bool allowed(std::string_view t, uint8_t kind) const;
    std::shared_ptr<const TokenTable> table_;
    ThinkBlock think_;
    std::string left_;  // what the output must still write
    bool started_ = false;
};

}  // namespace dl
