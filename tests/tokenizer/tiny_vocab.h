// Small hand-built vocabularies for the tokenizer tests, so that expected token ids can be worked
// out by hand.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace dl::tokenizer::test {

// GPT-2's byte-level character for a byte (the independent spelling of the alphabet: printable
// Latin-1 maps to itself, the other 68 bytes to U+0100.. in byte order).
inline std::string byte_char(unsigned b) {
    unsigned cp = b;
    if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
        unsigned k = 0;
        for (unsigned x = 0; x < b; ++x) {
            if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) ++k;
        }
        cp = 256 + k;
    }
    std::string s;
    if (cp < 0x80) {
        s += char(cp);
    } else {
        s += char(0xC0 | (cp >> 6));
        s += char(0x80 | (cp & 0x3F));
    }
    return s;
}

// Byte-level BPE: ids 0..255 are the single bytes (id == byte value), then the merge results in
// merge order, then <|x|> (CONTROL) and <u> (USER_DEFINED).
struct TinyBpe {
    Vocab vocab;
    int32_t id_ab, id_bc, id_abc, id_aa, id_sp_a, id_x, id_u;
    TinyBpe() {
        vocab.kind = VocabKind::BPE;
        vocab.model = "gpt2";
        vocab.pre = "qwen2";
        for (unsigned b = 0; b < 256; ++b) vocab.tokens.push_back(byte_char(b));
        vocab.types.assign(256, TokenType::NORMAL);
        auto add = [&](const std::string& t, TokenType type = TokenType::NORMAL) {
            vocab.tokens.push_back(t);
            vocab.types.push_back(type);
            return int32_t(vocab.tokens.size() - 1);
        };
        id_ab = add("ab");
        id_bc = add("bc");
        id_abc = add("abc");
        id_aa = add("aa");
        id_sp_a =
            add("\xC4\xA0"
                "a");  // "Ġa": space + a
        id_x = add("<|x|>", TokenType::CONTROL);
        id_u = add("<u>", TokenType::USER_DEFINED);
        vocab.merges = {"a b", "b c", "ab c", "a a", "\xC4\xA0 a"};
        vocab.eos = id_x;
    }
};

// SentencePiece: <unk>, <s>, </s>, the 256 byte pieces, then scored pieces.
struct TinySpm {
    Vocab vocab;
    int32_t sp, h, e, l, o, sp_h, he, ll, lo, sp_he, llo;
    static constexpr int32_t kByte0 = 3;  // id of <0x00>
    TinySpm() {
        vocab.kind = VocabKind::SPM;
        vocab.model = "llama";
        vocab.pre = "default";
        auto add = [&](const std::string& t, float score, TokenType type) {
            vocab.tokens.push_back(t);
            vocab.scores.push_back(score);
            vocab.types.push_back(type);
            return int32_t(vocab.tokens.size() - 1);
        };
        add("<unk>", 0, TokenType::UNKNOWN);
        add("<s>", 0, TokenType::CONTROL);
        add("</s>", 0, TokenType::CONTROL);
        for (int b = 0; b < 256; ++b) {
            char name[8];
            std::snprintf(name, sizeof name, "<0x%02X>", b);
            add(name, 0, TokenType::BYTE);
        }
        const std::string S = "\xE2\x96\x81";  // U+2581
        sp = add(S, -1.0f, TokenType::NORMAL);
        h = add("h", -5.0f, TokenType::NORMAL);
        e = add("e", -5.0f, TokenType::NORMAL);
        l = add("l", -5.0f, TokenType::NORMAL);
        o = add("o", -5.0f, TokenType::NORMAL);
        sp_h = add(S + "h", -3.0f, TokenType::NORMAL);
        he = add("he", -2.0f, TokenType::NORMAL);
        ll = add("ll", -1.5f, TokenType::NORMAL);
        lo = add("lo", -4.0f, TokenType::NORMAL);
        sp_he = add(S + "he", -1.0f, TokenType::NORMAL);
        llo = add("llo", -0.5f, TokenType::NORMAL);
        vocab.unk = 0, vocab.bos = 1, vocab.eos = 2;
        vocab.add_bos = true;
        vocab.add_space_prefix = true;
    }
};

}  // namespace dl::tokenizer::test
