// Text <-> token ids from a GGUF file's tokenizer metadata: byte-level BPE ("gpt2" models such as
// Qwen and Llama 3, with the pre-tokenizer regex named by tokenizer.ggml.pre) and SentencePiece
// BPE ("llama" models with scores and <0xNN> byte fallback), plus a streaming decoder that only
// ever hands out complete UTF-8.
//
// A Tokenizer is immutable after construction; encode() and the decoders may be used from several
// threads at once (each thread with its own StreamDecoder).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dl::gguf {
class File;
class Writer;
}  // namespace dl::gguf

namespace dl::tokenizer {

// tokenizer.ggml.token_type, as numbered in GGUF files.
enum class TokenType : int32_t {
    UNDEFINED = 0,
    NORMAL = 1,
    UNKNOWN = 2,
    CONTROL = 3,       // <|im_start|>, <s>: matched in text only when parse_special is set
    USER_DEFINED = 4,  // added tokens such as <think>: always matched in text, stored as raw text
    UNUSED = 5,
    BYTE = 6,  // SentencePiece <0xNN> byte-fallback pieces
};

// tokenizer.ggml.model
enum class VocabKind {
    BPE,  // "gpt2": byte-level BPE over GPT-2's byte-to-unicode alphabet, merges by rank
    SPM,  // "llama": SentencePiece BPE by piece score, U+2581 for spaces, <0xNN> byte fallback
};

// Everything the tokenizer needs, as read from the metadata. Tests build one directly.
struct Vocab {
    VocabKind kind = VocabKind::BPE;
    std::string model = "gpt2";   // tokenizer.ggml.model as written in the file
    std::string pre = "default";  // tokenizer.ggml.pre: "qwen2", "qwen35", "llama-bpe", "gpt2" ...
    std::vector<std::string> tokens;  // tokenizer.ggml.tokens, indexed by id
    std::vector<TokenType> types;     // tokenizer.ggml.token_type (NORMAL when absent)
    std::vector<float> scores;        // tokenizer.ggml.scores (SPM; may be empty for BPE)
    std::vector<std::string> merges;  // tokenizer.ggml.merges: "left right", best rank first
    int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1, sep = -1;
    bool add_bos = false;  // tokenizer.ggml.add_bos_token
    bool add_eos = false;  // tokenizer.ggml.add_eos_token
    // tokenizer.ggml.add_space_prefix: SentencePiece's leading space (from_gguf defaults it to
    // true for SPM vocabularies, as their converters do).
    bool add_space_prefix = false;
    std::string chat_template;  // tokenizer.chat_template ("" when absent)

    // Reads the tokenizer.* keys; throws dl::Error naming the key when one is missing, of the
    // wrong type or inconsistent (token_type count differs from tokens, an id out of range ...).
    static Vocab from_gguf(const gguf::File& file);
    // Writes the same keys (the inverse of from_gguf), for converters and tests.
    void to_gguf(gguf::Writer& writer) const;
};

class Tokenizer {
  public:
    // Validates the vocabulary and builds the lookup tables (throws dl::Error on bad input).
    explicit Tokenizer(Vocab vocab);
    ~Tokenizer();
    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;

    // Text (any bytes; invalid UTF-8 is kept as byte tokens) -> token ids.
    // add_special: add BOS (and EOS) where the vocabulary asks for it (add_bos / add_eos).
    // parse_special: CONTROL tokens written in the text (<|im_start|>) become their ids; without
    // it they are tokenized as plain text. USER_DEFINED tokens are always recognized.
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

    // The raw bytes a token stands for (CONTROL tokens give their text, e.g. "<|im_end|>"; an SPM
    // byte token gives its one byte). May be a partial UTF-8 sequence. "" for an id out of range.
    std::string token_text(int32_t id) const;
    // The concatenated bytes of the tokens (SPM's dummy-prefix space on the first token removed).
    // May hold invalid UTF-8 when the ids do; use StreamDecoder for display.
    std::string decode(std::span<const int32_t> ids) const;

    // End of generation: eos, eot, eom and the control tokens known to end a turn.
    bool is_eog(int32_t id) const;
    bool is_control(int32_t id) const;
    int32_t bos() const { return vocab_.bos; }  // -1 when the vocabulary has none
    int32_t eos() const { return vocab_.eos; }
    int32_t pad() const { return vocab_.pad; }
    int32_t n_vocab() const { return static_cast<int32_t>(vocab_.tokens.size()); }
    // The id of a token's exact vocabulary string ("<|im_end|>"), or -1.
    int32_t find_token(std::string_view text) const;
    const std::vector<int32_t>& eog_ids() const { return eog_; }
    const Vocab& vocab() const { return vocab_; }

    struct Impl;

  private:
    Vocab vocab_;
    std::vector<int32_t> eog_;
    std::unique_ptr<Impl> impl_;
};

// Turns a stream of token ids into text pieces that are always complete, valid UTF-8: a character
// split across tokens is held back until its last byte arrives; bytes that can never form a
// character come out as U+FFFD.
class StreamDecoder {
  public:
    explicit StreamDecoder(const Tokenizer& tokenizer) : tok_(&tokenizer) {}
    std::string push(int32_t id);
    // Whatever is still held back (an unfinished character becomes U+FFFD); resets the decoder.
    std::string flush();

  private:
    const Tokenizer* tok_;
    std::string pending_;  // at most one incomplete UTF-8 sequence (< 4 bytes)
};

// The pre-tokenizer split a vocabulary uses, exposed for tests and tools: the pieces the text is
// cut into before BPE (byte strings, concatenating back to the text).
std::vector<std::string> pre_tokenize(std::string_view pre, std::string_view text);

}  // namespace dl::tokenizer
