// Byte-level BPE on a hand-built vocabulary: merge order by rank and position, special tokens with
// and without parse_special, invalid UTF-8, and the GGUF metadata round trip of a Vocab.
#include <gtest/gtest.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tiny_vocab.h"
#include "tokenizer/tokenizer.h"

namespace dl::tokenizer {
namespace {

using test::TinyBpe;
using Ids = std::vector<int32_t>;

TEST(Bpe, MergesByRankThenLeftmost) {
    TinyBpe t;
    Tokenizer tok(t.vocab);
    // (a,b) has rank 0, (b,c) rank 1: ab first, then (ab,c) rank 2 gives abc.
    EXPECT_EQ(tok.encode("abc", false, false), Ids({t.id_abc}));
    // b c a b: (a,b) rank 0 merges before (b,c) rank 1; then bc; no (bc,ab) merge.
    EXPECT_EQ(tok.encode("bcab", false, false), Ids({t.id_bc, t.id_ab}));
    // Equal ranks: the leftmost pair merges first.
    EXPECT_EQ(tok.encode("aaa", false, false), Ids({t.id_aa, 'a'}));
    EXPECT_EQ(tok.encode("aaaa", false, false), Ids({t.id_aa, t.id_aa}));
    // No merge crosses a pre-tokenizer boundary: "a" and " a" are separate pieces.
    EXPECT_EQ(tok.encode("a a", false, false), Ids({'a', t.id_sp_a}));
    EXPECT_EQ(tok.encode("", false, false), Ids({}));
}

TEST(Bpe, BytesWithoutMergesAreByteTokens) {
    TinyBpe t;
    Tokenizer tok(t.vocab);
    EXPECT_EQ(tok.encode("\xE2\x82\xAC", false, false), Ids({0xE2, 0x82, 0xAC}));  // €
    EXPECT_EQ(tok.encode("\n\t", false, false), Ids({'\n', '\t'}));
}

TEST(Bpe, InvalidUtf8BecomesByteTokensAndRoundTrips) {
    TinyBpe t;
    Tokenizer tok(t.vocab);
    const std::string text =
        "ab\xFF"
        "c\xC3"
        " \xE2\x82 a\x80\x80\xF5\xED\xA0\x80";
    Ids ids = tok.encode(text, false, false);
    EXPECT_EQ(tok.decode(ids), text);
    // The stray bytes are their own pieces, so they come out as single byte tokens.
    EXPECT_EQ(ids[0], t.id_ab);
    EXPECT_EQ(ids[1], 0xFF);
    // Every possible byte on its own, and all of them in a row.
    std::string all;
    for (int b = 0; b < 256; ++b) {
        std::string one(1, char(b));
        all += one;
        EXPECT_EQ(tok.decode(tok.encode(one, false, false)), one) << b;
    }
    EXPECT_EQ(tok.decode(tok.encode(all, false, false)), all);
}

TEST(Bpe, SpecialTokens) {
    TinyBpe t;
    Tokenizer tok(t.vocab);
    // CONTROL tokens are recognized only with parse_special.
    EXPECT_EQ(tok.encode("ab<|x|>abc", false, true), Ids({t.id_ab, t.id_x, t.id_abc}));
    EXPECT_EQ(tok.encode("ab<|x|>abc", false, false),
              Ids({t.id_ab, '<', '|', 'x', '|', '>', t.id_abc}));
    // USER_DEFINED tokens always are.
    EXPECT_EQ(tok.encode("a<u>a", false, false), Ids({'a', t.id_u, 'a'}));
    EXPECT_EQ(tok.encode("<u><|x|><u>", false, true), Ids({t.id_u, t.id_x, t.id_u}));
    EXPECT_EQ(tok.encode("<|x|", false, true), Ids({'<', '|', 'x', '|'}));
    EXPECT_EQ(tok.token_text(t.id_x), "<|x|>");
    EXPECT_TRUE(tok.is_control(t.id_x));
    EXPECT_FALSE(tok.is_control(t.id_u));
    EXPECT_TRUE(tok.is_eog(t.id_x));  // it is the eos
    EXPECT_FALSE(tok.is_eog(t.id_ab));
}

TEST(Bpe, AddSpecialFollowsTheVocabulary) {
    TinyBpe t;
    t.vocab.bos = t.id_u;
    t.vocab.add_bos = false;
    EXPECT_EQ(Tokenizer(t.vocab).encode("a", true, false), Ids({'a'}));
    t.vocab.add_bos = true;
    t.vocab.add_eos = true;
    EXPECT_EQ(Tokenizer(t.vocab).encode("a", true, false), Ids({t.id_u, 'a', t.id_x}));
    EXPECT_EQ(Tokenizer(t.vocab).encode("a", false, false), Ids({'a'}));
}

TEST(Bpe, IgnoreMergesTakesWholePieces) {
    // Llama 3's split takes a piece that is itself a token as one token, even when the merges
    // would not reach it: here "ca" has no merge path.
    TinyBpe t;
    t.vocab.pre = "llama-bpe";
    t.vocab.tokens.push_back("ca");
    t.vocab.types.push_back(TokenType::NORMAL);
    const int32_t id_ca = int32_t(t.vocab.tokens.size() - 1);
    EXPECT_EQ(Tokenizer(t.vocab).encode("ca", false, false), Ids({id_ca}));
    t.vocab.pre = "qwen2";
    EXPECT_EQ(Tokenizer(t.vocab).encode("ca", false, false), Ids({'c', 'a'}));
}

TEST(Bpe, BadVocabulariesAreErrors) {
    {
        TinyBpe t;
        t.vocab.pre = "no-such-pre";
        EXPECT_THROW(Tokenizer{t.vocab}, Error);
    }
    {
        TinyBpe t;
        t.vocab.types.pop_back();
        EXPECT_THROW(Tokenizer{t.vocab}, Error);
    }
    {
        TinyBpe t;
        t.vocab.eos = int32_t(t.vocab.tokens.size());
        EXPECT_THROW(Tokenizer{t.vocab}, Error);
    }
    {
        TinyBpe t;
        t.vocab.merges.push_back("nospace");
        EXPECT_THROW(Tokenizer{t.vocab}, Error);
    }
    EXPECT_THROW(Tokenizer{Vocab{}}, Error);
}

TEST(Bpe, VocabGgufRoundTrip) {
    TinyBpe t;
    t.vocab.pad = t.id_u;
    t.vocab.chat_template = "{{ messages }}";
    gguf::Writer w;
    t.vocab.to_gguf(w);
    const std::vector<uint8_t> bytes = w.to_bytes();
    const gguf::File f = gguf::File::parse(bytes.data(), bytes.size());
    const Vocab v = Vocab::from_gguf(f);
    EXPECT_EQ(v.kind, VocabKind::BPE);
    EXPECT_EQ(v.pre, "qwen2");
    EXPECT_EQ(v.tokens, t.vocab.tokens);
    EXPECT_EQ(v.types, t.vocab.types);
    EXPECT_EQ(v.merges, t.vocab.merges);
    EXPECT_EQ(v.eos, t.id_x);
    EXPECT_EQ(v.pad, t.id_u);
    EXPECT_EQ(v.bos, -1);
    EXPECT_FALSE(v.add_bos);
    EXPECT_EQ(v.chat_template, "{{ messages }}");
    Tokenizer tok(v);
    EXPECT_EQ(tok.encode("abc<|x|>", false, true), Ids({t.id_abc, t.id_x}));
}

TEST(Bpe, BadGgufMetadataIsAnError) {
    auto parse = [](gguf::Writer& w) {
        static std::vector<uint8_t> bytes;
        bytes = w.to_bytes();
        return Vocab::from_gguf(gguf::File::parse(bytes.data(), bytes.size()));
    };
    TinyBpe t;
    {
        gguf::Writer w;
        t.vocab.to_gguf(w);
        w.set("tokenizer.ggml.model", gguf::Value::str("wordpiece"));
        EXPECT_THROW(parse(w), Error);
    }
    {
        gguf::Writer w;
        t.vocab.to_gguf(w);
        w.set("tokenizer.ggml.token_type", gguf::Value::array_of_i32({1, 1}));
        EXPECT_THROW(parse(w), Error);
    }
    {
        gguf::Writer w;
        t.vocab.to_gguf(w);
        w.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(1000000));
        EXPECT_THROW(parse(w), Error);
    }
    {
        gguf::Writer w;
        t.vocab.to_gguf(w);
        w.set("tokenizer.ggml.tokens", gguf::Value::array_of_i32({1, 2}));
        EXPECT_THROW(parse(w), Error);
    }
    {
        gguf::Writer w;
        w.set("general.architecture", gguf::Value::str("qwen3"));
        EXPECT_THROW(parse(w), Error);  // no tokenizer at all
    }
}

// The Qwen tokenizers declare an NFC normalizer: "e" + U+0301 (combining acute) encodes as the
// composed "é" does, as Hugging Face's tokenizer does. Llama 3's declares none and keeps it.
TEST(Bpe, QwenFamiliesNormalizeToNfc) {
    const std::string decomposed = "e\xCC\x81", composed = "\xC3\xA9";
    for (const char* pre : {"qwen2", "qwen35"}) {
        TinyBpe t;
        t.vocab.pre = pre;
        Tokenizer tok(t.vocab);
        SCOPED_TRACE(pre);
        EXPECT_EQ(tok.encode(composed, false, false), Ids({0xC3, 0xA9}));
        EXPECT_EQ(tok.encode(decomposed, false, false), Ids({0xC3, 0xA9}));
        EXPECT_EQ(tok.encode("ab" + decomposed + "<|x|>" + decomposed, false, true),
                  Ids({t.id_ab, 0xC3, 0xA9, t.id_x, 0xC3, 0xA9}));
        // Bytes that are not UTF-8 are still encoded as they are.
        EXPECT_EQ(tok.encode("\xFF" + decomposed, false, false), Ids({0xFF, 'e', 0xCC, 0x81}));
    }
    TinyBpe t;
    t.vocab.pre = "llama-bpe";
    EXPECT_EQ(Tokenizer(t.vocab).encode(decomposed, false, false), Ids({'e', 0xCC, 0x81}));
}

}  // namespace
}  // namespace dl::tokenizer
