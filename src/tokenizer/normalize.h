// Unicode normalization the vocabularies' reference tokenizers apply before splitting: the Qwen
// tokenizers (pre-tokenizers qwen2 and qwen35) declare NFC in tokenizer.json, which GGUF files do
// not carry, so "e" + U+0301 must become "é" before it is encoded, as Hugging Face's tokenizer
// does. Uses ICU's normalizer.
#pragma once

#include <string>
#include <string_view>

namespace dl::tokenizer {

// Whether the reference tokenizer of a tokenizer.ggml.pre family normalizes to NFC.
bool pre_uses_nfc(std::string_view pre);

// text in NFC. Text that is not valid UTF-8 is returned unchanged (byte-level BPE still encodes
// its bytes), and so is text that is already in NFC (ASCII always is).
std::string to_nfc(std::string_view text);

}  // namespace dl::tokenizer
