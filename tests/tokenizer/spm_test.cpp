// SentencePiece BPE on a hand-built scored vocabulary: merges by score, the dummy prefix, byte
// fallback for characters outside the vocabulary, and decoding back.
#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "tiny_vocab.h"
#include "tokenizer/tokenizer.h"

namespace dl::tokenizer {
namespace {

using test::TinySpm;
using Ids = std::vector<int32_t>;

TEST(Spm, MergesByScore) {
    TinySpm t;
    Tokenizer tok(t.vocab);
    // "▁hello": ll (-1.5) first, then llo (-0.5), then he (-2), then ▁he (-1); worked by hand.
    EXPECT_EQ(tok.encode("hello", false, false), Ids({t.sp_he, t.llo}));
    EXPECT_EQ(tok.encode("hello", true, false), Ids({1, t.sp_he, t.llo}));
    // "▁hell": ll, then he, then ▁he.
    EXPECT_EQ(tok.encode("hell", false, false), Ids({t.sp_he, t.ll}));
    // "▁lo": no (▁,l) piece, so ▁ stays alone.
    EXPECT_EQ(tok.encode("lo", false, false), Ids({t.sp, t.lo}));
}

TEST(Spm, ByteFallback) {
    TinySpm t;
    Tokenizer tok(t.vocab);
    // é is not a piece: its two UTF-8 bytes become <0xC3><0xA9>.
    EXPECT_EQ(tok.encode("h\xC3\xA9", false, false),
              Ids({t.sp_h, TinySpm::kByte0 + 0xC3, TinySpm::kByte0 + 0xA9}));
    // Spaces become ▁ pieces; letters outside the vocabulary become bytes.
    EXPECT_EQ(tok.encode("a b", false, false),
              Ids({t.sp, TinySpm::kByte0 + 'a', t.sp, TinySpm::kByte0 + 'b'}));
    // An invalid byte falls back to its byte piece too.
    EXPECT_EQ(tok.encode("\xFF", false, false), Ids({t.sp, TinySpm::kByte0 + 0xFF}));
}

TEST(Spm, SpecialTokensAndPrefix) {
    TinySpm t;
    Tokenizer tok(t.vocab);
    // The dummy prefix goes at the start and after each special token.
    EXPECT_EQ(tok.encode("<s>hello", false, true), Ids({1, t.sp_he, t.llo}));
    EXPECT_EQ(tok.encode("<s>hello", false, false),
              Ids({t.sp, TinySpm::kByte0 + '<', TinySpm::kByte0 + 's', TinySpm::kByte0 + '>', t.he,
                   t.llo}));
    t.vocab.add_space_prefix = false;
    EXPECT_EQ(Tokenizer(t.vocab).encode("hello", false, false), Ids({t.he, t.llo}));
}

TEST(Spm, DecodeRoundTrips) {
    TinySpm t;
    Tokenizer tok(t.vocab);
    for (std::string text : {"hello", " hello", "hello  world",
                             "h\xC3\xA9llo \xE4\xBD\xA0\xE5\xA5\xBD", "\xF0\x9F\x98\x80!", ""}) {
        EXPECT_EQ(tok.decode(tok.encode(text, false, false)), text) << text;
    }
    EXPECT_EQ(tok.token_text(t.sp_he), " he");
    EXPECT_EQ(tok.token_text(TinySpm::kByte0 + 0x41), "A");
    // Streaming joins byte-fallback pieces into whole characters.
    StreamDecoder dec(tok);
    std::string out;
    for (int32_t id : tok.encode("h\xC3\xA9", false, false)) out += dec.push(id);
    out += dec.flush();
    EXPECT_EQ(out, " h\xC3\xA9");  // the stream keeps the dummy prefix's space
}

TEST(Spm, GgufDefaultsAndRoundTrip) {
    TinySpm t;
    gguf::Writer w;
    t.vocab.to_gguf(w);
    const auto bytes = w.to_bytes();
    const Vocab v = Vocab::from_gguf(gguf::File::parse(bytes.data(), bytes.size()));
    EXPECT_EQ(v.kind, VocabKind::SPM);
    EXPECT_EQ(v.scores, t.vocab.scores);
    EXPECT_TRUE(v.add_bos);
    EXPECT_TRUE(v.add_space_prefix);
    EXPECT_EQ(Tokenizer(v).encode("hello", true, false), Ids({1, t.sp_he, t.llo}));

    // Without the optional keys, SPM files mean unk=0, bos=1, eos=2, BOS added, dummy prefix on.
    gguf::Writer bare;
    bare.set("tokenizer.ggml.model", gguf::Value::str("llama"));
    bare.set("tokenizer.ggml.tokens", gguf::Value::array_of_strings(t.vocab.tokens));
    bare.set("tokenizer.ggml.scores", gguf::Value::array_of_f32(t.vocab.scores));
    std::vector<int32_t> types;
    for (auto x : t.vocab.types) types.push_back(int32_t(x));
    bare.set("tokenizer.ggml.token_type", gguf::Value::array_of_i32(types));
    const auto b2 = bare.to_bytes();
    const Vocab d = Vocab::from_gguf(gguf::File::parse(b2.data(), b2.size()));
    EXPECT_EQ(d.unk, 0);
    EXPECT_EQ(d.bos, 1);
    EXPECT_EQ(d.eos, 2);
    EXPECT_TRUE(d.add_bos);
    EXPECT_TRUE(d.add_space_prefix);
    EXPECT_EQ(Tokenizer(d).encode("hello", true, false), Ids({1, t.sp_he, t.llo}));
}

}  // namespace
}  // namespace dl::tokenizer
