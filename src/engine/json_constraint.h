// Output constrained to JSON (the API's response_format {"type": "json_object"}): before each
// sampled token, every token whose bytes cannot continue a JSON object is masked out, and once
// the object is closed only the end of the turn may follow, so what the model writes parses.
//
// JsonPrefix is the byte-level recognizer: RFC 8259 text whose top-level value is an object,
// with strings of valid UTF-8 (no lone surrogates in \u escapes, as strict parsers demand),
// nesting up to kMaxDepth, and blank runs outside strings of at most kMaxWhitespace bytes and
// one line break (a sampler can otherwise spend the whole budget on blank lines and padding;
// pretty-printed JSON needs no more). It is a few words of state, copied for each candidate
// token.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/token_constraint.h"

namespace dl {

namespace tokenizer {
class Tokenizer;
}

class JsonPrefix {
  public:
    static constexpr int kMaxDepth = 64;
    static constexpr int kMaxWhitespace = 32;

    // Takes one byte; false (the state unchanged) when no JSON object text continues with it.
    bool feed(uint8_t c);
    bool feed(std::string_view bytes);  // all or nothing
    bool complete() const { return expect_ == Expect::end; }
    // Inside a string with no escape or UTF-8 sequence open: any run of plain characters fits.
    bool in_plain_string() const {
        return lex_ == Lex::string && utf8_left_ == 0 && !escape_ && hex_left_ == 0 &&
               !low_surrogate_next_;
    }

  private:
    enum class Expect : uint8_t {
        object,
        value,
        value_or_close,
        key,
        key_or_close,
        colon,
        comma_or_close,
        end
    };
    enum class Lex : uint8_t { none, string, number, literal };
    enum class Num : uint8_t { minus, zero, int_digits, dot, frac, exp, exp_sign, exp_digits };

    bool after_value();
    bool open(bool object);
    bool close();
    bool start_value(uint8_t c);
    bool string_byte(uint8_t c);
    bool number_byte(uint8_t c, bool& ended);

    Expect expect_ = Expect::object;
    Lex lex_ = Lex::none;
    Num num_ = Num::minus;
    bool key_ = false;                 // the string being read is an object's key
    bool escape_ = false;              // after a backslash
    uint8_t hex_left_ = 0;             // hex digits of a \u escape still to come
    uint16_t hex_ = 0;                 // its value so far
    bool low_surrogate_next_ = false;  // a \uD800-\uDBFF was read: \uDC00-\uDFFF must follow
    uint8_t utf8_left_ = 0;            // continuation bytes still to come
    uint8_t utf8_lo_ = 0x80, utf8_hi_ = 0xBF;  // the range of the next continuation byte
    uint8_t literal_ = 0;                      // which of true/false/null (0, 1, 2)
    uint8_t literal_at_ = 0;                   // bytes of it read
    uint8_t blanks_ = 0;                       // whitespace bytes in a row
    bool line_break_ = false;                  // one of them a line break
    int8_t depth_ = 0;
    uint64_t objects_ = 0;  // bit d: the container at depth d + 1 is an object
};

// The tokens' bytes and classes, made once for a vocabulary and shared by every request.
struct JsonTokenTable {
    explicit JsonTokenTable(const tokenizer::Tokenizer& tok);
    std::vector<uint32_t> offsets;  // token i's bytes: bytes[offsets[i] .. offsets[i + 1])
    std::string bytes;
    std::vector<uint8_t> kind;  // kPlain, kOther, kSpecial, kEndOfTurn
    // The text tokens (kPlain, kOther) by their first byte: a byte JSON cannot take next rules
    // out its whole group at once.
    std::vector<int32_t> by_first[256];
    static constexpr uint8_t kPlain = 0;    // valid UTF-8, no '"', '\\' or control character
    static constexpr uint8_t kOther = 1;    // other text
    static constexpr uint8_t kSpecial = 2;  // a control or user-defined token: never in JSON
    static constexpr uint8_t kEndOfTurn = 3;
    std::string_view text(int32_t id) const {
        return std::string_view(bytes).substr(offsets[id], offsets[id + 1] - offsets[id]);
    }
};

// The constraint of one request. reasoning: the model may write a <think> block first (opened by
// the prompt already with starts_in_reasoning); the JSON starts after it.
class JsonConstraint : public TokenConstraint {
  public:
    JsonConstraint(std::shared_ptr<const JsonTokenTable> table, bool reasoning,
                   bool starts_in_reasoning);
    int64_t mask(std::span<float> logits) override;
    void accept(int32_t token) override;

  private:
    bool allowed(int32_t id) const;
    std::shared_ptr<const JsonTokenTable> table_;
    JsonPrefix json_;
    bool reasoning_allowed_;
    bool in_reasoning_;
    bool json_started_ = false;
    std::string reasoning_tail_;  // the reasoning's last bytes, to find "</think>" across tokens
};

}  // namespace dl
