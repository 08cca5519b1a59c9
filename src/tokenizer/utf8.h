// UTF-8 helpers for the tokenizer: decoding one character with validation (invalid bytes are
// reported, never trusted), encoding code points, and GPT-2's reversible byte <-> unicode alphabet
// that byte-level BPE vocabularies are written in.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dl::tokenizer::utf8 {

// Length of the valid UTF-8 character starting at s (1..4), or 0 when the bytes there do not
// start a valid, complete character (bad lead byte, bad continuation, overlong, surrogate, past
// U+10FFFF, or cut off by the end of the buffer).
size_t char_len(const uint8_t* s, size_t n, uint32_t* cp = nullptr);

// How many of the first n bytes (n < 4) could still become a valid character once more bytes
// arrive: n when they are a proper prefix of some valid sequence, else 0.
bool is_incomplete_prefix(const uint8_t* s, size_t n);

// Whether s is whole, valid UTF-8 (every byte part of a complete character).
bool valid(std::string_view s);

void append(std::string& out, uint32_t cp);

// The replacement character's bytes.
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// GPT-2's byte-level alphabet: each byte value maps to one printable code point (printable
// Latin-1 bytes map to themselves, the rest to U+0100..U+0143), so any byte string becomes a
// printable unicode string and back.
struct ByteAlphabet {
    std::array<uint32_t, 256> byte_to_cp{};
    std::array<std::string, 256> byte_to_utf8;
    std::array<int16_t, 324> cp_to_byte{};  // -1 where a code point is not in the alphabet

    ByteAlphabet();
    // The bytes a byte-level token string stands for; characters outside the alphabet are kept
    // as they are (they only occur in vocabularies that store added tokens as raw text).
    std::string decode(std::string_view token) const;
    std::string encode(std::string_view bytes) const;
};

const ByteAlphabet& byte_alphabet();

}  // namespace dl::tokenizer::utf8
