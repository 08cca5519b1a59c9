// The template lexer: splits a chat template into text and the tokens inside {{ }} and {% %},
// applying Jinja's whitespace control as Hugging Face configures it (trim_blocks and
// lstrip_blocks on, one trailing newline dropped, "-" and "+" markers on tags).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dl::tmpl {

enum class TokenKind {
    Text,        // literal output between tags
    VarBegin,    // {{
    VarEnd,      // }}
    BlockBegin,  // {%
    BlockEnd,    // %}
    Name,
    String,
    Integer,
    Float,
    Operator,
    End,
};

struct Token {
    TokenKind kind;
    std::string text;  // the name, operator, unescaped string or literal text
    int64_t integer = 0;
    double number = 0;
    int line = 1;
};

// dl::Error (with the line) for an unterminated tag, comment or string, or a stray character.
std::vector<Token> lex(std::string_view source);

}  // namespace dl::tmpl
