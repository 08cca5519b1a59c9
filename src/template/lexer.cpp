// Tokenizing a template, with Jinja's whitespace rules (see lexer.h).
#include "template/lexer.h"

#include <cctype>
#include <cstring>

#include "core/error.h"
#include "template/value.h"

namespace dl::tmpl {
namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_name_start(char c) {
    return std::isalpha((unsigned char)c) || c == '_';
}
bool is_name_char(char c) {
    return std::isalnum((unsigned char)c) || c == '_';
}

int count_lines(std::string_view s) {
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
}

// Jinja reads the whole source with every line ending as "\n", and drops one final newline.
std::string normalize(std::string_view source) {
    std::string out;
    out.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            out += '\n';
            if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        } else {
            out += source[i];
        }
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

class Lexer {
  public:
    explicit Lexer(std::string src) : src_(std::move(src)) {}

    std::vector<Token> run() {
        bool line_starting = true;
        while (pos_ < src_.size()) {
            size_t p = find_tag(pos_);
            std::string text = src_.substr(pos_, p - pos_);
            if (p == src_.size()) {
                emit_text(text);
                break;
            }
            char kind = src_[p + 1];  // '{', '%' or '#'
            char sign = p + 2 < src_.size() ? src_[p + 2] : 0;
            int text_line = line_;
            line_ += count_lines(text);
            if (sign == '-') {
                size_t e = text.size();
                while (e > 0 && is_space(text[e - 1])) --e;
                text.resize(e);
            } else if (sign != '+' && kind != '{') {
                size_t l_pos = text.rfind('\n');
                l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
                if (l_pos > 0 || line_starting) {
                    bool blank = l_pos < text.size();
                    for (size_t i = l_pos; i < text.size(); ++i) blank = blank && is_space(text[i]);
                    if (blank) text.resize(l_pos);
                }
            }
            emit_text(text, text_line);
            pos_ = p + 2 + (sign == '-' || sign == '+' ? 1 : 0);
            if (kind == '#') {
                line_starting = comment();
            } else if (kind == '%' && raw_begins()) {
                line_starting = raw();
            } else {
                line_starting = tag(kind == '{');
            }
        }
        tokens_.push_back(Token{TokenKind::End, "", 0, 0, line_});
        return std::move(tokens_);
    }

  private:
    std::string src_;
    size_t pos_ = 0;
    int line_ = 1;
    std::vector<Token> tokens_;

    size_t find_tag(size_t from) const {
        for (size_t i = from; i + 1 < src_.size(); ++i) {
            if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
                return i;
        }
        return src_.size();
    }

    void emit_text(const std::string& text, int line = -1) {
        if (text.empty()) return;
        tokens_.push_back(Token{TokenKind::Text, text, 0, 0, line < 0 ? line_ : line});
    }

    // After a block or comment end without "-" or "+", trim_blocks removes one newline.
    // Returns whether what the tag end consumed ended with a newline (Jinja's "line starting").
    bool after_end(char sign) {
        size_t start = pos_;
        if (sign == '-') {
            while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
        } else if (sign == 0 && pos_ < src_.size() && src_[pos_] == '\n') {
            ++pos_;
        }
        line_ += count_lines(std::string_view(src_).substr(start, pos_ - start));
        return pos_ > start && src_[pos_ - 1] == '\n';
    }

    bool comment() {
        size_t e = src_.find("#}", pos_);
        if (e == std::string::npos) fail("chat template line {}: unterminated comment", line_);
        char sign = e > pos_ && (src_[e - 1] == '-' || src_[e - 1] == '+') ? src_[e - 1] : 0;
        line_ += count_lines(std::string_view(src_).substr(pos_, e - pos_));
        pos_ = e + 2;
        return after_end(sign);
    }

    // At "{% raw %}"? (pos_ is just past "{%" and its sign.)
    bool raw_begins() const {
        size_t i = pos_;
        while (i < src_.size() && is_space(src_[i])) ++i;
        if (src_.compare(i, 3, "raw") != 0) return false;
        i += 3;
        while (i < src_.size() && is_space(src_[i])) ++i;
        if (i < src_.size() && src_[i] == '-') ++i;
        return src_.compare(i, 2, "%}") == 0;  // "{% raw %}" exactly, else it is an unknown tag
    }

    bool raw() {
        size_t close = src_.find("%}", pos_);
        if (close == std::string::npos) fail("chat template line {}: unterminated raw tag", line_);
        bool strip_after = src_[close - 1] == '-';
        pos_ = close + 2;
        if (strip_after)
            while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
        for (size_t i = pos_; i + 1 < src_.size(); ++i) {
            if (src_[i] != '{' || src_[i + 1] != '%') continue;
            size_t j = i + 2;
            char sign = j < src_.size() && (src_[j] == '-' || src_[j] == '+') ? src_[j++] : 0;
            while (j < src_.size() && is_space(src_[j])) ++j;
            if (src_.compare(j, 6, "endraw") != 0) continue;
            j += 6;
            while (j < src_.size() && is_space(src_[j])) ++j;
            char end_sign = j < src_.size() && (src_[j] == '-' || src_[j] == '+') ? src_[j++] : 0;
            if (src_.compare(j, 2, "%}") != 0) continue;
            std::string text = src_.substr(pos_, i - pos_);
            int text_line = line_;
            line_ += count_lines(std::string_view(src_).substr(pos_, j + 2 - pos_));
            if (sign == '-') {
                while (!text.empty() && is_space(text.back())) text.pop_back();
            }
            emit_text(text, text_line);
            pos_ = j + 2;
            return after_end(end_sign);
        }
        fail("chat template line {}: missing endraw", line_);
    }

    // The tokens of an expression or statement up to its closing "}}" or "%}".
    bool tag(bool variable) {
        tokens_.push_back(
            Token{variable ? TokenKind::VarBegin : TokenKind::BlockBegin, "", 0, 0, line_});
        const char close = variable ? '}' : '%';
        int depth = 0;  // open brackets: "}}" closes a dict literal inside them
        for (;;) {
            while (pos_ < src_.size() && is_space(src_[pos_])) {
                line_ += src_[pos_] == '\n';
                ++pos_;
            }
            if (pos_ >= src_.size())
                fail("chat template line {}: unexpected end of template inside a tag", line_);
            char c = src_[pos_];
            char sign = 0;
            size_t at = pos_;
            if ((c == '-' || c == '+') && src_.compare(pos_ + 1, 1, std::string(1, close)) == 0 &&
                src_.compare(pos_ + 2, 1, "}") == 0 && depth == 0) {
                sign = c;
                at = pos_ + 1;
            }
            if (depth == 0 && src_[at] == close && at + 1 < src_.size() && src_[at + 1] == '}') {
                tokens_.push_back(
                    Token{variable ? TokenKind::VarEnd : TokenKind::BlockEnd, "", 0, 0, line_});
                pos_ = at + 2;
                if (variable) {
                    if (sign != '-') return false;
                    return after_end('-');
                }
                return after_end(sign);
            }
            if (is_name_start(c)) {
                size_t e = pos_;
                while (e < src_.size() && is_name_char(src_[e])) ++e;
                push(TokenKind::Name, src_.substr(pos_, e - pos_));
                pos_ = e;
            } else if (std::isdigit((unsigned char)c)) {
                number();
            } else if (c == '\'' || c == '"') {
                string(c);
            } else {
                static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
                std::string op;
                for (const char* t : two)
                    if (src_.compare(pos_, 2, t) == 0) op = t;
                if (op.empty()) {
                    if (!std::strchr("+-*/%~<>=()[]{},.:|", c))
                        fail("chat template line {}: unexpected character '{}'", line_, c);
                    op = std::string(1, c);
                }
                if (op == "(" || op == "[" || op == "{") ++depth;
                if (op == ")" || op == "]" || op == "}") {
                    if (depth == 0) fail("chat template line {}: unexpected '{}'", line_, op);
                    --depth;
                }
                push(TokenKind::Operator, op);
                pos_ += op.size();
            }
        }
    }

    void push(TokenKind kind, std::string text) {
        tokens_.push_back(Token{kind, std::move(text), 0, 0, line_});
    }

    void number() {
        size_t e = pos_;
        std::string digits;
        bool is_float = false;
        auto run = [&] {
            while (e < src_.size() && (std::isdigit((unsigned char)src_[e]) || src_[e] == '_')) {
                if (src_[e] != '_') digits += src_[e];
                ++e;
            }
        };
        run();
        if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit((unsigned char)src_[e + 1])) {
            is_float = true;
            digits += src_[e++];
            run();
        }
        if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
            size_t f = e + 1;
            if (f < src_.size() && (src_[f] == '+' || src_[f] == '-')) ++f;
            if (f < src_.size() && std::isdigit((unsigned char)src_[f])) {
                is_float = true;
                digits += src_.substr(e, f - e);
                e = f;
                run();
            }
        }
        Token t{is_float ? TokenKind::Float : TokenKind::Integer, digits, 0, 0, line_};
        try {
            if (is_float) {
                t.number = std::stod(digits);
            } else {
                t.integer = std::stoll(digits);
            }
        } catch (const std::exception&) {
            fail("chat template line {}: number {} is out of range", line_, digits);
        }
        tokens_.push_back(std::move(t));
        pos_ = e;
    }

    // A string literal with Python's escapes.
    void string(char quote) {
        std::string out;
        size_t i = pos_ + 1;
        int start_line = line_;
        for (;;) {
            if (i >= src_.size())
                fail("chat template line {}: unterminated string literal", start_line);
            char c = src_[i];
            if (c == quote) break;
            if (c == '\n') ++line_;
            if (c != '\\' || i + 1 >= src_.size()) {
                out += c;
                ++i;
                continue;
            }
            char n = src_[i + 1];
            i += 2;
            switch (n) {
                case 'n':
                    out += '\n';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case '0':
                    out += '\0';
                    break;
                case 'a':
                    out += '\a';
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case 'v':
                    out += '\v';
                    break;
                case '\\':
                    out += '\\';
                    break;
                case '\'':
                    out += '\'';
                    break;
                case '"':
                    out += '"';
                    break;
                case '\n':
                    ++line_;
                    break;
                case 'N':  // Python's \N{name}: named characters are not supported
                    fail("chat template line {}: unsupported \\N escape in a string", line_);
                case 'x':
                case 'u':
                case 'U': {
                    size_t len = n == 'x' ? 2 : n == 'u' ? 4 : 8;
                    std::string hex = src_.substr(i, len);
                    if (hex.size() != len ||
                        hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
                        fail("chat template line {}: bad \\{} escape in a string", line_, n);
                    char32_t cp = char32_t(std::stoul(hex, nullptr, 16));
                    std::u32string one(1, cp);
                    out += utf8_encode(one);
                    i += len;
                    break;
                }
                default:
                    out += '\\';
                    out += n;
            }
        }
        tokens_.push_back(Token{TokenKind::String, out, 0, 0, start_line});
        pos_ = i + 1;
    }
};

}  // namespace

std::vector<Token> lex(std::string_view source) {
    return Lexer(normalize(source)).run();
}

}  // namespace dl::tmpl
