// A byte-level vocabulary with the control tokens of ChatML and Llama 3 and the added tokens
// Qwen marks thinking and tool calls with, for the chat tests: every other byte is its own token.
#pragma once

#include <string>

#include "tokenizer/tiny_vocab.h"
#include "tokenizer/tokenizer.h"

namespace dl::test {

inline tokenizer::Vocab chat_vocab(bool llama) {
    using tokenizer::TokenType;
    tokenizer::Vocab v;
    v.kind = tokenizer::VocabKind::BPE;
    v.model = "gpt2";
    v.pre = llama ? "llama-bpe" : "qwen2";
    for (unsigned b = 0; b < 256; ++b) v.tokens.push_back(tokenizer::test::byte_char(b));
    v.types.assign(256, TokenType::NORMAL);
    auto add = [&](const std::string& t, TokenType type) {
        v.tokens.push_back(t);
        v.types.push_back(type);
        return int32_t(v.tokens.size() - 1);
    };
    for (const char* t :
         {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>",
          "<|end_header_id|>", "<|eot_id|>", "<|python_tag|>"})
        add(t, TokenType::CONTROL);
    for (const char* t : {"<think>", "</think>", "<tool_call>", "</tool_call>"})
        add(t, TokenType::USER_DEFINED);
    v.bos = llama ? 259 : 256;
    v.eos = llama ? 262 : 258;
    v.add_bos = llama;
    return v;
}

}  // namespace dl::test
