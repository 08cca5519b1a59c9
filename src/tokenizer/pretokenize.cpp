// Pre-tokenizer regexes by tokenizer.ggml.pre name, run with PCRE2 (UTF + UCP, JIT when built in).
//
// The patterns are the ones the models' tokenizer.json files carry, with two rewrites that keep
// their meaning under PCRE2:
//  - (?i:'s|'t|...) is spelled with explicit [sS] classes: PCRE2's caseless matching would also
//    accept U+017F (long s) and the Kelvin sign, which the reference tokenizers do not.
//  - \s and \S mean Unicode White_Space (what the reference tokenizers use). PCRE2's \s under UCP
//    also matches U+180E, which is no longer White_Space, so the class is written out.
#include "tokenizer/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"

namespace dl::tokenizer {

namespace {

// Unicode White_Space, as the body of a character class.
constexpr std::string_view kWhiteSpace =
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";

const char* const kContractions = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";

// Qwen2 / Qwen3: letters with one leading non-letter, single digits, punctuation runs that take
// trailing newlines, newline runs with their leading spaces, then the remaining whitespace.
const std::string kQwen2 = std::string(kContractions) +
                           R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*)"
                           R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5: as Qwen2, but combining marks (\p{M}) stay with the letters they modify.
const std::string kQwen35 =
    std::string(kContractions) +
    R"(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Llama 3: as Qwen2, but digits in groups of up to three.
const std::string kLlama3 = std::string(kContractions) +
                            R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*)"
                            R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";
// GPT-2.
const std::string kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Rewrites \s and \S into explicit White_Space classes (see the file comment).
std::string with_white_space(std::string_view pattern) {
    std::string out;
    bool in_class = false;
    for (size_t i = 0; i < pattern.size(); ++i) {
        const char c = pattern[i];
        if (c == '\\' && i + 1 < pattern.size()) {
            const char e = pattern[i + 1];
            ++i;
            if (e == 's') {
                if (in_class) {
                    out += kWhiteSpace;
                } else {
                    out += '[';
                    out += kWhiteSpace;
                    out += ']';
                }
            } else if (e == 'S') {
                DL_ASSERT(!in_class);
                out += "[^";
                out += kWhiteSpace;
                out += ']';
            } else {
                out += c;
                out += e;
            }
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = true;
        } else if (c == ']' && in_class) {
            in_class = false;
        }
        out += c;
    }
    return out;
}

}  // namespace

struct PreTokenizer::Regex {
    pcre2_code* code = nullptr;
    bool jit = false;
    ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns) {
    for (const auto& p : patterns) {
        auto re = std::make_unique<Regex>();
        const std::string pattern = with_white_space(p);
        int err = 0;
        PCRE2_SIZE err_at = 0;
        re->code =
            pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_at, nullptr);
        if (!re->code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            fail("pre-tokenizer regex does not compile at offset {}: {}", err_at,
                 reinterpret_cast<const char*>(msg));
        }
        re->jit = pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE) == 0;
        regexes_.push_back(std::move(re));
    }
}

PreTokenizer::~PreTokenizer() = default;

std::unique_ptr<PreTokenizer> PreTokenizer::for_name(std::string_view pre) {
    std::unique_ptr<PreTokenizer> p;
    if (pre == "qwen2" || pre == "deepseek-r1-qwen" || pre == "stablelm2" || pre == "hunyuan") {
        p = std::make_unique<PreTokenizer>(std::vector<std::string>{kQwen2});
    } else if (pre == "qwen35") {
        p = std::make_unique<PreTokenizer>(std::vector<std::string>{kQwen35});
    } else if (pre == "llama3" || pre == "llama-bpe" || pre == "llama-v3" || pre == "smaug-bpe" ||
               pre == "dbrx") {
        p = std::make_unique<PreTokenizer>(std::vector<std::string>{kLlama3});
        p->ignore_merges = pre != "dbrx" && pre != "smaug-bpe";
    } else if (pre == "gpt2" || pre == "gpt-2" || pre == "mpt" || pre == "olmo" || pre == "phi-2" ||
               pre == "jais" || pre == "roberta-bpe") {
        p = std::make_unique<PreTokenizer>(std::vector<std::string>{kGpt2});
    } else if (pre == "starcoder" || pre == "refact") {
        p = std::make_unique<PreTokenizer>(std::vector<std::string>{R"(\p{N})", kGpt2});
    } else if (pre == "default" || pre.empty()) {
        // The split GGUF readers apply when a file names no specific pre-tokenizer.
        p = std::make_unique<PreTokenizer>(std::vector<std::string>{
            R"([\p{P}\$\+<=>\^~\|]+)",
            R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
            R"(\p{N}+)", "[0-9][0-9][0-9]"});
    } else {
        fail("tokenizer.ggml.pre '{}' names a pre-tokenizer this build does not know", pre);
    }
    return p;
}

namespace {

// Splits one piece by one regex: matches and the text between them become pieces.
void split_one(pcre2_code* code, bool jit, pcre2_match_data* md, std::string_view piece,
               std::vector<std::string_view>& out) {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    size_t start = 0;
    size_t last = 0;  // end of the previous match
    while (start < piece.size()) {
        int rc = jit ? pcre2_jit_match(code, subject, piece.size(), start, 0, md, nullptr)
                     : pcre2_match(code, subject, piece.size(), start, 0, md, nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
            // Very long runs can exhaust the JIT's stack; the interpreter works from the heap.
            rc = pcre2_match(code, subject, piece.size(), start, PCRE2_NO_JIT, md, nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            fail("pre-tokenizer could not split the text: {}", reinterpret_cast<const char*>(msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t m0 = ov[0], m1 = ov[1];
        if (m0 > last) out.push_back(piece.substr(last, m0 - last));
        if (m1 > m0) {
            out.push_back(piece.substr(m0, m1 - m0));
            last = m1;
            start = m1;
        } else {
            // An empty match: step over one byte so the loop advances (the patterns never match
            // empty, this only guards against looping forever).
            start = m0 + 1;
        }
    }
    if (last < piece.size()) out.push_back(piece.substr(last));
}

}  // namespace

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
    if (text.empty()) return;
    std::vector<std::string_view> cur{text};
    std::vector<std::string_view> next;
    for (size_t r = 0; r < regexes_.size(); ++r) {
        const Regex& re = *regexes_[r];
        pcre2_match_data* md = pcre2_match_data_create_from_pattern(re.code, nullptr);
        if (!md) fail("out of memory for the pre-tokenizer");
        next.clear();
        try {
            for (auto piece : cur) split_one(re.code, re.jit, md, piece, next);
        } catch (...) {
            pcre2_match_data_free(md);
            throw;
        }
        pcre2_match_data_free(md);
        cur.swap(next);
    }
    out.insert(out.end(), cur.begin(), cur.end());
}

}  // namespace dl::tokenizer
