// Streaming detokenization: hands out text only in whole UTF-8 characters, so that a terminal or
// an HTTP event stream never sees half a character when one is spread over several tokens.
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace dl::tokenizer {

namespace {

// Moves the complete characters of buf to out; bytes that can never become a character become
// U+FFFD; a trailing sequence that may still complete stays in buf.
void drain(std::string& buf, std::string& out, bool final) {
    const auto* s = reinterpret_cast<const uint8_t*>(buf.data());
    const size_t n = buf.size();
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            out.push_back(char(s[i++]));
            continue;
        }
        const size_t len = utf8::char_len(s + i, n - i);
        if (len > 0) {
            out.append(buf, i, len);
            i += len;
            continue;
        }
        if (!final && utf8::is_incomplete_prefix(s + i, n - i)) break;
        // One U+FFFD per maximal invalid prefix: the lead byte plus the continuation bytes that
        // still fit a valid sequence.
        size_t bad = 1;
        while (bad < 3 && i + bad < n && utf8::is_incomplete_prefix(s + i, bad + 1)) ++bad;
        out += utf8::kReplacement;
        i += bad;
    }
    buf.erase(0, i);
}

}  // namespace

std::string StreamDecoder::push(int32_t id) {
    pending_ += tok_->token_text(id);
    std::string out;
    drain(pending_, out, false);
    return out;
}

std::string StreamDecoder::flush() {
    std::string out;
    drain(pending_, out, true);
    pending_.clear();
    return out;
}

}  // namespace dl::tokenizer
