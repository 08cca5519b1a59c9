// The byte-level recognizer of JSON objects that the JSON-constrained output runs on
// (json_constraint.h): RFC 8259 text whose top-level value is an object, with strings of valid
// UTF-8 (no lone surrogates in \u escapes, as strict parsers demand), nesting up to kMaxDepth,
// and blank runs outside strings of at most kMaxWhitespace bytes and one line break (a sampler
// can otherwise spend the whole budget on blank lines and padding; pretty-printed JSON needs no
// more). Numbers have at most kMaxIntegerDigits digits before the point and kMaxExponentDigits in
// the exponent, so that each is a finite double (strict parsers refuse 1e400). It is a few words
// of state, copied for each candidate token.
#pragma once

#include <cstdint>
#include <string_view>

namespace dl {

class JsonPrefix {
  public:
    static constexpr int kMaxDepth = 64;
    static constexpr int kMaxWhitespace = 20;
    static constexpr int kMaxIntegerDigits = 64;
    static constexpr int kMaxExponentDigits = 2;

    // Takes one byte; false (the state unchanged) when no JSON object text continues with it.
    bool feed(uint8_t c);
    bool feed(std::string_view bytes);  // all or nothing
    bool complete() const { return expect_ == Expect::end; }
    // Inside a string with no escape or UTF-8 sequence open: any run of plain characters fits.
    bool in_plain_string() const {
        return lex_ == Lex::string && utf8_n_ == 0 && !escape_ && hex_left_ == 0 &&
               !low_surrogate_next_;
    }

    bool in_free_string() const { return in_plain_string(); }  // as SchemaPrefix has it

    // Where the recognizer stands, for a schema's checks over the same bytes (json_schema.h).
    bool in_string() const { return lex_ == Lex::string; }
    bool in_key() const { return lex_ == Lex::string && key_; }
    bool in_number() const { return lex_ == Lex::number; }
    bool in_literal() const { return lex_ == Lex::literal; }
    // The next byte that is not blank starts a value (or, after '[', may close the array).
    bool expects_value() const {
        return lex_ == Lex::none && (expect_ == Expect::object || expect_ == Expect::value ||
                                     expect_ == Expect::value_or_close);
    }
    bool expects_key() const {
        return lex_ == Lex::none && (expect_ == Expect::key || expect_ == Expect::key_or_close);
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
    bool utf8_byte(uint8_t c);
    bool number_byte(uint8_t c, bool& ended);

    Expect expect_ = Expect::object;
    Lex lex_ = Lex::none;
    Num num_ = Num::minus;
    bool key_ = false;                 // the string being read is an object's key
    bool escape_ = false;              // after a backslash
    uint8_t hex_left_ = 0;             // hex digits of a \u escape still to come
    uint16_t hex_ = 0;                 // its value so far
    bool low_surrogate_next_ = false;  // a \uD800-\uDBFF was read: \uDC00-\uDFFF must follow
    uint8_t utf8_[3] = {};             // the bytes of an unfinished character
    uint8_t utf8_n_ = 0;
    uint8_t digits_ = 0;       // digits of the number's integer part or exponent so far
    uint8_t literal_ = 0;      // which of true/false/null (0, 1, 2)
    uint8_t literal_at_ = 0;   // bytes of it read
    uint8_t blanks_ = 0;       // whitespace bytes in a row
    bool line_break_ = false;  // one of them a line break
    int8_t depth_ = 0;
    uint64_t objects_ = 0;  // bit d: the container at depth d + 1 is an object
};

}  // namespace dl
