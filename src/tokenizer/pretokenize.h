// The regex pre-tokenizer of byte-level BPE: cuts text into the pieces that BPE merges within
// (words, numbers, punctuation runs, whitespace), using PCRE2 with Unicode properties and JIT.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dl::tokenizer {

class PreTokenizer {
  public:
    // The split for a tokenizer.ggml.pre name; throws dl::Error for a name we do not know (a wrong
    // split would silently produce tokens the model never saw).
    static std::unique_ptr<PreTokenizer> for_name(std::string_view pre);
    // A split made of these regexes applied one after the other (each one re-splits every piece
    // of the previous one; text between matches stays a piece of its own).
    explicit PreTokenizer(const std::vector<std::string>& patterns);
    ~PreTokenizer();
    PreTokenizer(const PreTokenizer&) = delete;
    PreTokenizer& operator=(const PreTokenizer&) = delete;

    // Appends the pieces of text (views into it, in order, covering it exactly) to out. Bytes that
    // are not valid UTF-8 never match a pattern and so end up in pieces of their own.
    void split(std::string_view text, std::vector<std::string_view>& out) const;

    // Whether BPE should take a whole piece as one token when the vocabulary has it, before any
    // merge (Llama 3's tokenizer.json sets ignore_merges).
    bool ignore_merges = false;

  private:
    struct Regex;
    std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace dl::tokenizer
