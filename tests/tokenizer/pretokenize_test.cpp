// Pre-tokenizer splits on hand-checked strings: Llama 3 (digit triples), Qwen2, Qwen3.5
// (combining marks stay with their letters), GPT-2, and whitespace per Unicode White_Space.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace dl::tokenizer {
namespace {

using Pieces = std::vector<std::string>;

TEST(PreTokenize, Llama3) {
    const char* p = "llama-bpe";
    EXPECT_EQ(pre_tokenize(p, "Hello world"), Pieces({"Hello", " world"}));
    EXPECT_EQ(pre_tokenize(p, "1234567"), Pieces({"123", "456", "7"}));
    EXPECT_EQ(pre_tokenize(p, "I'M here, you're"),
              Pieces({"I", "'M", " here", ",", " you", "'re"}));
    EXPECT_EQ(pre_tokenize(p, "a  \n\nb"), Pieces({"a", "  \n\n", "b"}));
    EXPECT_EQ(pre_tokenize(p, "x   y"), Pieces({"x", "  ", " y"}));
    EXPECT_EQ(pre_tokenize(p, "$100.50!!\n"), Pieces({"$", "100", ".", "50", "!!\n"}));
    // A space run leaves its last character to lead the next piece (here a tab before letters).
    EXPECT_EQ(pre_tokenize(p, " \tif(x){"), Pieces({" ", "\tif", "(x", "){"}));
    EXPECT_EQ(pre_tokenize(p, "trailing  "), Pieces({"trailing", "  "}));
    EXPECT_EQ(pre_tokenize("llama3", "12345"), Pieces({"123", "45"}));
}

TEST(PreTokenize, Qwen2) {
    const char* p = "qwen2";
    EXPECT_EQ(pre_tokenize(p, "1234567"), Pieces({"1", "2", "3", "4", "5", "6", "7"}));
    EXPECT_EQ(pre_tokenize(p, "Hello, World!"), Pieces({"Hello", ",", " World", "!"}));
    // A combining mark is not a letter here: it starts the next piece or stands alone.
    EXPECT_EQ(pre_tokenize(p, "q\u0301x"), Pieces({"q", "\u0301x"}));
    EXPECT_EQ(pre_tokenize(p, "नमस्ते"), Pieces({"नमस", "्त", "े"}));
}

TEST(PreTokenize, Qwen35KeepsMarksWithLetters) {
    const char* p = "qwen35";
    EXPECT_EQ(pre_tokenize(p, "q\u0301x"), Pieces({"q\u0301x"}));
    EXPECT_EQ(pre_tokenize(p, "नमस्ते दुनिया"), Pieces({"नमस्ते", " दुनिया"}));
    EXPECT_EQ(pre_tokenize(p, "2024 is"), Pieces({"2", "0", "2", "4", " is"}));
    EXPECT_EQ(pre_tokenize(p, "don'T stop"), Pieces({"don", "'T", " stop"}));
    // Marks are also left out of punctuation runs: "!" then the mark joins the letter after it.
    EXPECT_EQ(pre_tokenize(p, "!\u0301a"), Pieces({"!\u0301a"}));
    EXPECT_EQ(pre_tokenize(p, "!!\u0301"), Pieces({"!!", "\u0301"}));
    EXPECT_EQ(pre_tokenize("qwen2", "!!\u0301"), Pieces({"!!\u0301"}));
}

TEST(PreTokenize, Gpt2) {
    const char* p = "gpt2";
    EXPECT_EQ(pre_tokenize(p, "I'm 12345 cats!!"), Pieces({"I", "'m", " 12345", " cats", "!!"}));
    // GPT-2's contractions are lower-case only.
    EXPECT_EQ(pre_tokenize(p, "I'M"), Pieces({"I", "'", "M"}));
}

TEST(PreTokenize, WhiteSpaceIsUnicodeWhiteSpace) {
    // U+180E (Mongolian vowel separator) stopped being White_Space in Unicode 6.3: it belongs to
    // the punctuation run, not a whitespace piece.
    EXPECT_EQ(pre_tokenize("qwen2", "!\u180E"), Pieces({"!\u180E"}));
    // U+3000 and U+00A0 are White_Space.
    EXPECT_EQ(pre_tokenize("qwen2", "!\u3000\u00A0"), Pieces({"!", "\u3000\u00A0"}));
    // The contractions match only the ASCII letters (not U+017F, which folds to s).
    EXPECT_EQ(pre_tokenize("qwen2", "x'\u017Fy"), Pieces({"x", "'\u017Fy"}));
}

TEST(PreTokenize, InvalidUtf8AndHugeRuns) {
    const std::string bad =
        "ab\xFF\xFE"
        "cd\xC3";
    Pieces p = pre_tokenize("qwen2", bad);
    EXPECT_EQ(p, Pieces({"ab", "\xFF\xFE", "cd", "\xC3"}));
    // Long runs must neither overflow the matcher's stack nor take quadratic time.
    const std::string spaces(1 << 20, ' ');
    p = pre_tokenize("qwen2", spaces + "x");
    ASSERT_EQ(p.size(), 2u);
    EXPECT_EQ(p[0].size(), spaces.size() - 1);
    EXPECT_EQ(p[1], " x");
    const std::string letters(1 << 20, 'a');
    EXPECT_EQ(pre_tokenize("qwen35", letters).size(), 1u);
    EXPECT_THROW(pre_tokenize("unknown-pre", "x"), Error);
}

TEST(PreTokenize, PiecesCoverTheText) {
    const std::string text = "Mixed: 中文, English, 123\r\n\t  ‍👍🏽 'll 'LL ☃\xFF";
    for (const char* p : {"qwen2", "qwen35", "llama-bpe", "gpt2", "default", "starcoder"}) {
        std::string joined;
        for (const auto& s : pre_tokenize(p, text)) {
            EXPECT_FALSE(s.empty()) << p;
            joined += s;
        }
        EXPECT_EQ(joined, text) << p;
    }
}

}  // namespace
}  // namespace dl::tokenizer
