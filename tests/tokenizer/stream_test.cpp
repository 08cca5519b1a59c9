// The streaming decoder: multi-byte characters split across tokens are held back until whole,
// bytes that can never form a character become U+FFFD, and every piece is valid UTF-8.
#include <gtest/gtest.h>

#include "tiny_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace dl::tokenizer {
namespace {

using test::TinyBpe;

const std::string kFFFD = "\xEF\xBF\xBD";

// Ids 0..255 of TinyBpe are the single bytes.
std::vector<std::string> pushes(const Tokenizer& tok, const std::string& bytes, bool flush) {
    StreamDecoder dec(tok);
    std::vector<std::string> out;
    for (unsigned char c : bytes) out.push_back(dec.push(c));
    if (flush) out.push_back(dec.flush());
    return out;
}

// Whole, valid UTF-8, and text with a cut, stray, overlong or surrogate byte sequence.
TEST(Utf8, ValidIsWholeCharacters) {
    EXPECT_TRUE(utf8::valid(""));
    EXPECT_TRUE(utf8::valid("a \xC3\xA9\xE4\xB8\x96\xF0\x9F\x98\x80"));
    for (const char* bad : {"\xC3", "a\xE4\xB8", "\x80", "\xC0\xAF", "\xED\xA0\x80", "\xFF"})
        EXPECT_FALSE(utf8::valid(bad)) << bad;
}

TEST(StreamDecoder, HoldsBackSplitCharacters) {
    TinyBpe t;
    Tokenizer tok(t.vocab);
    using V = std::vector<std::string>;
    EXPECT_EQ(pushes(tok, "\xE2\x82\xAC", false), V({"", "", "\xE2\x82\xAC"}));  // €
    EXPECT_EQ(pushes(tok,
                     "\xF0\x9F\x98\x80"
                     "a",
                     false),
              V({"", "", "", "\xF0\x9F\x98\x80", "a"}));  // 😀 then a
    EXPECT_EQ(pushes(tok, "\xC3\xA9\xC3", true), V({"", "\xC3\xA9", "", kFFFD}));
    // Multi-byte tokens: "ab" then a token that completes nothing.
    StreamDecoder dec(tok);
    EXPECT_EQ(dec.push(t.id_ab), "ab");
    EXPECT_EQ(dec.push(0xE4), "");
    EXPECT_EQ(dec.push(0xBD), "");
    EXPECT_EQ(dec.push(0xA0), "\xE4\xBD\xA0");  // 你
    EXPECT_EQ(dec.push(t.id_x), "<|x|>");
    EXPECT_EQ(dec.flush(), "");
}

TEST(StreamDecoder, InvalidBytesBecomeReplacementCharacters) {
    TinyBpe t;
    Tokenizer tok(t.vocab);
    using V = std::vector<std::string>;
    EXPECT_EQ(pushes(tok, "\xFF", false), V({kFFFD}));
    EXPECT_EQ(pushes(tok,
                     "\x80"
                     "a",
                     false),
              V({kFFFD, "a"}));
    // A lead byte followed by a non-continuation: the lead is replaced, the next byte kept.
    EXPECT_EQ(pushes(tok,
                     "\xE2"
                     "a",
                     false),
              V({"", kFFFD + "a"}));
    // A valid two-byte prefix of a three-byte character cut short: one U+FFFD for both bytes.
    EXPECT_EQ(pushes(tok,
                     "\xE2\x82"
                     "b",
                     false),
              V({"", "", kFFFD + "b"}));
    // Overlong and surrogate encodings never become characters.
    EXPECT_EQ(pushes(tok, "\xC0\xAF", false), V({kFFFD, kFFFD}));
    // ED and F4 may start characters, so they wait for the next byte, which rules them out.
    EXPECT_EQ(pushes(tok, "\xED\xA0\x80", false), V({"", kFFFD + kFFFD, kFFFD}));
    EXPECT_EQ(pushes(tok, "\xF4\x90\x80\x80", false), V({"", kFFFD + kFFFD, kFFFD, kFFFD}));
    // Held bytes at the end come out on flush, and the decoder starts afresh after it.
    StreamDecoder dec(tok);
    EXPECT_EQ(dec.push(0xF0), "");
    EXPECT_EQ(dec.push(0x9F), "");
    EXPECT_EQ(dec.flush(), kFFFD);
    EXPECT_EQ(dec.push('z'), "z");
    EXPECT_EQ(dec.push(-5), "");  // an id out of range decodes to nothing
}

TEST(StreamDecoder, EveryPieceIsValidUtf8) {
    TinyBpe t;
    Tokenizer tok(t.vocab);
    // Every combination of three probe bytes, fed one byte at a time. The check is written from
    // the table of well-formed byte sequences in the Unicode standard (chapter 3).
    auto valid = [](const std::string& s) {
        auto at = [&](size_t i) { return static_cast<unsigned>(static_cast<unsigned char>(s[i])); };
        for (size_t i = 0; i < s.size();) {
            const unsigned c = at(i);
            unsigned lo = 0x80, hi = 0xBF;
            size_t n;
            if (c < 0x80) {
                n = 1;
            } else if (c >= 0xC2 && c <= 0xDF) {
                n = 2;
            } else if (c >= 0xE0 && c <= 0xEF) {
                n = 3;
                if (c == 0xE0) lo = 0xA0;
                if (c == 0xED) hi = 0x9F;
            } else if (c >= 0xF0 && c <= 0xF4) {
                n = 4;
                if (c == 0xF0) lo = 0x90;
                if (c == 0xF4) hi = 0x8F;
            } else {
                return false;
            }
            if (i + n > s.size()) return false;
            for (size_t k = 1; k < n; ++k) {
                const unsigned x = at(i + k);
                if (k == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) return false;
            }
            i += n;
        }
        return true;
    };
    const unsigned char probes[] = {0x00, 0x41, 0x7F, 0x80, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0,
                                    0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF, 0xA0, 0x9F, 0x90};
    for (unsigned char a : probes) {
        for (unsigned char b : probes) {
            for (unsigned char c : probes) {
                StreamDecoder dec(tok);
                std::string all;
                for (unsigned char x : {a, b, c}) {
                    std::string piece = dec.push(x);
                    EXPECT_TRUE(valid(piece)) << int(a) << " " << int(b) << " " << int(c);
                    all += piece;
                }
                const std::string tail = dec.flush();
                EXPECT_TRUE(valid(tail));
                all += tail;
                // Nothing is lost: valid input comes back as it went in.
                const std::string in{char(a), char(b), char(c)};
                if (valid(in)) {
                    EXPECT_EQ(all, in);
                }
            }
        }
    }
}

}  // namespace
}  // namespace dl::tokenizer
