// UTF-8 validation and GPT-2's byte-level alphabet (see utf8.h).
#include "tokenizer/utf8.h"

namespace dl::tokenizer::utf8 {

size_t char_len(const uint8_t* s, size_t n, uint32_t* cp) {
    if (n == 0) return 0;
    const uint8_t b0 = s[0];
    if (b0 < 0x80) {
        if (cp) *cp = b0;
        return 1;
    }
    size_t len;
    uint32_t c;
    uint32_t min;
    if ((b0 & 0xE0) == 0xC0) {
        len = 2, c = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        len = 3, c = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        len = 4, c = b0 & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; ++i) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    if (cp) *cp = c;
    return len;
}

bool valid(std::string_view s) {
    const auto* b = reinterpret_cast<const uint8_t*>(s.data());
    for (size_t at = 0; at < s.size();) {
        const size_t n = char_len(b + at, s.size() - at);
        if (n == 0) return false;
        at += n;
    }
    return true;
}

bool is_incomplete_prefix(const uint8_t* s, size_t n) {
    if (n == 0 || n >= 4) return false;
    const uint8_t b0 = s[0];
    size_t len;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        len = 2;
    } else if ((b0 & 0xF0) == 0xE0) {
        len = 3;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4;
    } else {
        return false;
    }
    if (n >= len) return false;
    for (size_t i = 1; i < n; ++i) {
        if ((s[i] & 0xC0) != 0x80) return false;
    }
    // The second byte narrows the range for E0/ED/F0/F4 (no overlongs, surrogates, > U+10FFFF).
    if (n >= 2) {
        const uint8_t b1 = s[1];
        if (b0 == 0xE0 && b1 < 0xA0) return false;
        if (b0 == 0xED && b1 > 0x9F) return false;
        if (b0 == 0xF0 && b1 < 0x90) return false;
        if (b0 == 0xF4 && b1 > 0x8F) return false;
    }
    return true;
}

void append(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

ByteAlphabet::ByteAlphabet() {
    cp_to_byte.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
        const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        byte_to_cp[b] = printable ? b : next++;
        cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
        append(byte_to_utf8[b], byte_to_cp[b]);
    }
}

std::string ByteAlphabet::decode(std::string_view token) const {
    std::string out;
    out.reserve(token.size());
    const auto* s = reinterpret_cast<const uint8_t*>(token.data());
    size_t i = 0;
    while (i < token.size()) {
        uint32_t cp = 0;
        size_t len = char_len(s + i, token.size() - i, &cp);
        if (len == 0) {
            out.push_back(token[i]);
            ++i;
            continue;
        }
        if (cp < cp_to_byte.size() && cp_to_byte[cp] >= 0) {
            out.push_back(static_cast<char>(cp_to_byte[cp]));
        } else {
            out.append(token.substr(i, len));
        }
        i += len;
    }
    return out;
}

std::string ByteAlphabet::encode(std::string_view bytes) const {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes) out += byte_to_utf8[static_cast<uint8_t>(c)];
    return out;
}

const ByteAlphabet& byte_alphabet() {
    static const ByteAlphabet alphabet;
    return alphabet;
}

}  // namespace dl::tokenizer::utf8
