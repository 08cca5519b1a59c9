// The tiny golden models' tokenizers (tests/data/golden/*, made with Hugging Face transformers):
// their tokenizer.json vocabularies and merges become Vocabs with the pre-tokenizer name a GGUF
// converter would write, and the encodings recorded in golden.json must come out exactly. This
// checks the Llama 3 and Qwen3.5 splits against the library that defines them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace dl::tokenizer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path golden_dir(const std::string& family) {
    const char* d = std::getenv("DELTALLM_TEST_DATA");
    const fs::path data = d ? fs::path(d) : fs::path(__FILE__).parent_path().parent_path() / "data";
    return data / "golden" / family;
}

json read_json(const fs::path& p) {
    std::ifstream in(p);
    if (!in) throw std::runtime_error("cannot read " + p.string());
    return json::parse(in);
}

Vocab vocab_from_tokenizer_json(const json& t, const std::string& pre) {
    Vocab v;
    v.kind = VocabKind::BPE;
    v.model = "gpt2";
    v.pre = pre;
    const auto& model = t["model"];
    size_t n = 0;
    for (const auto& [text, id] : model["vocab"].items()) n = std::max(n, id.get<size_t>() + 1);
    for (const auto& a : t["added_tokens"]) n = std::max(n, a["id"].get<size_t>() + 1);
    v.tokens.assign(n, "");
    v.types.assign(n, TokenType::UNUSED);
    for (const auto& [text, id] : model["vocab"].items()) {
        v.tokens[id.get<size_t>()] = text;
        v.types[id.get<size_t>()] = TokenType::NORMAL;
    }
    for (const auto& a : t["added_tokens"]) {
        const size_t id = a["id"];
        v.tokens[id] = a["content"].get<std::string>();
        v.types[id] = a["special"].get<bool>() ? TokenType::CONTROL : TokenType::USER_DEFINED;
    }
    for (const auto& m : model["merges"]) {
        v.merges.push_back(m.is_string() ? m.get<std::string>()
                                         : m[0].get<std::string>() + " " + m[1].get<std::string>());
    }
    return v;
}

void check_family(const std::string& family, const std::string& pre, const std::string& bos) {
    const json tj = read_json(golden_dir(family) / "tokenizer.json");
    const json golden = read_json(golden_dir(family) / "golden.json");
    Vocab v = vocab_from_tokenizer_json(tj, pre);
    if (!bos.empty()) {
        for (size_t i = 0; i < v.tokens.size(); ++i) {
            if (v.tokens[i] == bos) v.bos = int32_t(i);
        }
        ASSERT_GE(v.bos, 0);
        v.add_bos = true;
    }
    Tokenizer tok(std::move(v));
    const auto& tests = golden["tokenizer_tests"];
    ASSERT_GE(tests.size(), 3u);
    for (const auto& t : tests) {
        const std::string text = t["text"];
        const auto want = t["ids"].get<std::vector<int32_t>>();
        EXPECT_EQ(tok.encode(text, true, true), want) << family << ": " << text;
    }
}

TEST(GoldenTokenizers, Llama3) {
    check_family("llama", "llama-bpe", "<|begin_of_text|>");
}
TEST(GoldenTokenizers, Qwen3) {
    check_family("qwen3", "qwen2", "");
}
TEST(GoldenTokenizers, Qwen35) {
    check_family("qwen35", "qwen35", "");
}

}  // namespace
}  // namespace dl::tokenizer
