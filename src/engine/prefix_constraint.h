// Output that must open with one of given texts, after a thinking block where the model writes
// one: until one of them is written, only tokens that continue some (or complete one and go on)
// may come, never the end of the turn; then any. A forced tool call (tool_choice "required" or a
// named function) is its openings in the model's own syntax, one for each function it may name.
#pragma once

#include <bitset>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/token_constraint.h"
#include "engine/token_table.h"

namespace dl {

class PrefixConstraint : public TokenConstraint {
  public:
    PrefixConstraint(std::shared_ptr<const TokenTable> table, ThinkBlock think,
                     std::vector<std::string> openings);
    int64_t mask(std::span<float> logits) override;
    void accept(int32_t token) override;

  private:
    bool allowed(std::string_view t, uint8_t kind) const;
    std::shared_ptr<const TokenTable> table_;
    ThinkBlock think_;
    // What each opening the output is still on its way to must still write; empty once one is
    // written (the output is free).
    std::vector<std::string> left_;
    std::bitset<256> first_;  // the bytes any of them may go on with
    bool started_ = false;
    void update_first();
};

}  // namespace dl
