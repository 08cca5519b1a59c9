#include "engine/json_prefix.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace dl {

namespace {

bool is_blank(uint8_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_digit(uint8_t c) {
    return c >= '0' && c <= '9';
}
int hex_value(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}
constexpr std::string_view kLiterals[3] = {"true", "false", "null"};

}  // namespace

bool JsonPrefix::feed(std::string_view bytes) {
    JsonPrefix next = *this;
    for (char c : bytes)
        if (!next.feed((uint8_t)c)) return false;
    *this = next;
    return true;
}

bool JsonPrefix::feed(uint8_t c) {
    const JsonPrefix before = *this;
    bool ok = false;
    switch (lex_) {
        case Lex::string:
            ok = string_byte(c);
            break;
        case Lex::literal:
            ok = kLiterals[literal_][literal_at_] == c;
            if (ok && ++literal_at_ == kLiterals[literal_].size()) {
                lex_ = Lex::none;
                ok = after_value();
            }
            break;
        case Lex::number: {
            bool ended = false;
            ok = number_byte(c, ended);
            if (!ended) break;
            // The byte after a number is read as the byte after the value.
            lex_ = Lex::none;
            if (!after_value()) {
                ok = false;
                break;
            }
            [[fallthrough]];
        }
        case Lex::none:
            if (is_blank(c)) {
                ok = blanks_ < kMaxWhitespace && !(c == '\n' && line_break_);
                if (ok) ++blanks_;
                line_break_ = line_break_ || c == '\n';
                break;
            }
            blanks_ = 0;
            line_break_ = false;
            switch (expect_) {
                case Expect::object:
                    ok = c == '{' && open(true);
                    break;
                case Expect::value:
                    ok = start_value(c);
                    break;
                case Expect::value_or_close:
                    ok = c == ']' ? close() : start_value(c);
                    break;
                case Expect::key_or_close:
                    if (c == '}') {
                        ok = close();
                        break;
                    }
                    [[fallthrough]];
                case Expect::key:
                    ok = c == '"';
                    if (ok) {
                        lex_ = Lex::string;
                        key_ = true;
                    }
                    break;
                case Expect::colon:
                    ok = c == ':';
                    if (ok) expect_ = Expect::value;
                    break;
                case Expect::comma_or_close: {
                    const bool object = (objects_ >> (depth_ - 1)) & 1;
                    if (c == ',') {
                        ok = true;
                        expect_ = object ? Expect::key : Expect::value;
                    } else {
                        ok = c == (object ? '}' : ']') && close();
                    }
                    break;
                }
                case Expect::end:
                    ok = false;
                    break;
            }
            break;
    }
    if (!ok) *this = before;
    return ok;
}

// A value ended: what may follow it.
bool JsonPrefix::after_value() {
    expect_ = depth_ == 0 ? Expect::end : Expect::comma_or_close;
    return true;
}

bool JsonPrefix::open(bool object) {
    if (depth_ >= kMaxDepth) return false;
    if (object)
        objects_ |= uint64_t{1} << depth_;
    else
        objects_ &= ~(uint64_t{1} << depth_);
    ++depth_;
    expect_ = object ? Expect::key_or_close : Expect::value_or_close;
    return true;
}

bool JsonPrefix::close() {
    --depth_;
    return after_value();
}

bool JsonPrefix::start_value(uint8_t c) {
    switch (c) {
        case '{':
            return open(true);
        case '[':
            return open(false);
        case '"':
            lex_ = Lex::string;
            key_ = false;
            return true;
        case 't':
        case 'f':
        case 'n':
            lex_ = Lex::literal;
            literal_ = c == 't' ? 0 : c == 'f' ? 1 : 2;
            literal_at_ = 1;
            return true;
        case '-':
            lex_ = Lex::number;
            num_ = Num::minus;
            return true;
        default:
            if (!is_digit(c)) return false;
            lex_ = Lex::number;
            num_ = c == '0' ? Num::zero : Num::int_digits;
            digits_ = 1;
            return true;
    }
}

bool JsonPrefix::string_byte(uint8_t c) {
    if (utf8_n_ > 0) return utf8_byte(c);
    if (hex_left_ > 0) {
        const int h = hex_value(c);
        if (h < 0) return false;
        hex_ = (uint16_t)(hex_ << 4 | h);
        if (--hex_left_ > 0) return true;
        const bool high = hex_ >= 0xD800 && hex_ <= 0xDBFF, low = hex_ >= 0xDC00 && hex_ <= 0xDFFF;
        if (low_surrogate_next_ != low) return false;  // a lone half of a surrogate pair
        low_surrogate_next_ = high;
        return true;
    }
    if (escape_) {
        escape_ = false;
        if (c == 'u') {
            hex_left_ = 4;
            hex_ = 0;
            return true;
        }
        if (low_surrogate_next_) return false;
        return c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' ||
               c == 't';
    }
    if (c == '\\') {
        escape_ = true;
        return true;
    }
    if (low_surrogate_next_) return false;  // the pair's low half must come as \uDC00-\uDFFF
    if (c == '"') {
        lex_ = Lex::none;
        if (key_) {
            expect_ = Expect::colon;
            return true;
        }
        return after_value();
    }
    if (c < 0x20) return false;  // control characters must be escaped
    if (c < 0x80) return true;
    return utf8_byte(c);
}

// A byte of a character past ASCII in a string: held until the character is whole, refused
// where no valid UTF-8 continues the bytes held (the tokenizer's rules: no overlong forms, no
// surrogates, nothing past U+10FFFF).
bool JsonPrefix::utf8_byte(uint8_t c) {
    uint8_t seq[4] = {};
    std::copy(utf8_, utf8_ + utf8_n_, seq);
    seq[utf8_n_] = c;
    const size_t n = utf8_n_ + 1u;
    if (tokenizer::utf8::char_len(seq, n) == n) {
        utf8_n_ = 0;
        return true;
    }
    if (!tokenizer::utf8::is_incomplete_prefix(seq, n)) return false;
    std::copy(seq, seq + n, utf8_);
    utf8_n_ = (uint8_t)n;
    return true;
}

// A number byte; `ended` when c cannot be part of the number but the number is whole (c is then
// the byte after it).
bool JsonPrefix::number_byte(uint8_t c, bool& ended) {
    switch (num_) {
        case Num::minus:
            if (!is_digit(c)) return false;
            num_ = c == '0' ? Num::zero : Num::int_digits;
            digits_ = 1;
            return true;
        case Num::int_digits:
            if (is_digit(c)) return ++digits_ <= kMaxIntegerDigits;
            [[fallthrough]];
        case Num::zero:
            if (c == '.') {
                num_ = Num::dot;
            } else if (c == 'e' || c == 'E') {
                num_ = Num::exp;
            } else {
                ended = true;
            }
            return true;
        case Num::dot:
            if (!is_digit(c)) return false;
            num_ = Num::frac;
            return true;
        case Num::frac:
            if (is_digit(c)) return true;
            if (c == 'e' || c == 'E') {
                num_ = Num::exp;
                return true;
            }
            ended = true;
            return true;
        case Num::exp:
            if (c == '+' || c == '-') {
                num_ = Num::exp_sign;
                return true;
            }
            [[fallthrough]];
        case Num::exp_sign:
            if (!is_digit(c)) return false;
            num_ = Num::exp_digits;
            digits_ = 1;
            return true;
        case Num::exp_digits:
            if (is_digit(c)) return ++digits_ <= kMaxExponentDigits;
            ended = true;
            return true;
    }
    return false;
}

}  // namespace dl
