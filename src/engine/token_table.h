// The vocabulary's tokens as bytes, each with its class, made once for a tokenizer and shared by
// the requests whose output a constraint shapes (json_constraint.h, prefix_constraint.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dl {

namespace tokenizer {
class Tokenizer;
}

struct TokenTable {
    explicit TokenTable(const tokenizer::Tokenizer& tok);

    static constexpr uint8_t kText = 0;
    static constexpr uint8_t kSpecial = 1;    // a control, added or unused token: not text
    static constexpr uint8_t kEndOfTurn = 2;  // ends generation (eos, eot, <|im_end|>, ...)
    std::vector<uint8_t> kind;
    // Text a JSON string takes as it is, whatever came before in the string: valid UTF-8 with no
    // '"', '\\' or control character.
    std::vector<uint8_t> json_plain;
    // The text tokens by their first byte: a byte that cannot come next rules out its whole group
    // at once.
    std::vector<int32_t> by_first[256];
    std::vector<int32_t> not_text;  // the kSpecial and kEndOfTurn tokens (a few hundred)

    int32_t size() const { return (int32_t)kind.size(); }
    std::string_view text(int32_t id) const {
        return std::string_view(bytes_).substr(offsets_[id], offsets_[id + 1] - offsets_[id]);
    }

  private:
    std::vector<uint32_t> offsets_;  // token i's bytes: bytes_[offsets_[i] .. offsets_[i + 1])
    std::string bytes_;
};

// A thinking block the model may write before the shaped output: opened by the prompt already,
// or by the model's own <think> before anything else, and closed by </think> in any cut; one at
// most.
class ThinkBlock {
  public:
    ThinkBlock(bool model_thinks, bool opened_by_prompt)
        : may_think_(model_thinks || opened_by_prompt), inside_(opened_by_prompt) {}
    bool inside() const { return inside_; }
    // Whether the token text `t` may open a block now (before any output: `output_started`).
    bool may_open(std::string_view t, bool output_started) const {
        return may_think_ && !inside_ && !output_started && t == "<think>";
    }
    // Takes a sampled token's text; true when the block took it (inside, or opening it).
    bool accept(std::string_view t, bool output_started) {
        if (inside_) {
            tail_ += t;
            if (tail_.find("</think>") != std::string::npos) {
                inside_ = may_think_ = false;
                tail_.clear();
            } else if (tail_.size() > 16) {
                tail_.erase(0, tail_.size() - 16);
            }
            return true;
        }
        if (!may_open(t, output_started)) return false;
        inside_ = true;
        return true;
    }

  private:
    bool may_think_, inside_;
    std::string tail_;  // the block's last bytes, to find "</think>" across tokens
};

}  // namespace dl
