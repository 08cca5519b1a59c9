// The built-in model's tokenizer (scripts/model/tokenizer.json, trained by scripts/model/bpe.py)
// as the engine runs it: imported the way `deltallm convert` imports it, written to GGUF and read
// back, it must split held-out text into exactly the ids the trainer's own encoder wrote into
// scripts/model/tokenizer_check.json, and know the chat's control tokens.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/hf.h"
#include "convert/plan.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;

fs::path model_scripts() {
    const char* d = std::getenv("DELTALLM_TEST_DATA");
    return fs::path(d && *d ? d : "tests/data") / ".." / ".." / "scripts" / "model";
}

class ModelTokenizer : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = model_scripts();
        ASSERT_TRUE(fs::exists(dir_ / "tokenizer.json")) << dir_;
        nlohmann::json tok = nlohmann::json::parse(std::ifstream(dir_ / "tokenizer.json"));
        n_vocab_ = (int64_t)tok["model"]["vocab"].size() + (int64_t)tok["added_tokens"].size();
        auto m = std::make_shared<dl::convert::HfModel>();
        m->dir = dir_.string();
        m->arch = dl::Arch::qwen35;
        dl::convert::Plan plan;
        dl::convert::plan_tokenizer(*m, n_vocab_, plan);
        dl::gguf::Writer w;
        dl::convert::fill_writer(plan, dl::convert::parse_output_type("f32"), w);
        bytes_ = w.to_bytes();
        file_ = std::make_unique<dl::gguf::File>(
            dl::gguf::File::parse(bytes_.data(), bytes_.size(), "tokenizer"));
        tok_ = std::make_unique<dl::tokenizer::Tokenizer>(dl::tokenizer::Vocab::from_gguf(*file_));
    }
    fs::path dir_;
    int64_t n_vocab_ = 0;
    std::vector<uint8_t> bytes_;
    std::unique_ptr<dl::gguf::File> file_;
    std::unique_ptr<dl::tokenizer::Tokenizer> tok_;
};

TEST_F(ModelTokenizer, GgufEncodesHeldOutTextAsTheTrainer) {
    EXPECT_EQ(file_->get_string("tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(file_->get_string("tokenizer.ggml.pre"), "qwen35");
    nlohmann::json check = nlohmann::json::parse(std::ifstream(dir_ / "tokenizer_check.json"));
    ASSERT_GE(check["cases"].size(), 6u);
    for (const auto& c : check["cases"]) {
        const std::string text = c["text"];
        const std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
        std::vector<int32_t> got =
            tok_->encode(text, /*add_special=*/true, /*parse_special=*/false);
        EXPECT_EQ(got, want) << c["source"] << ": " << text.substr(0, 80);
        EXPECT_EQ(tok_->decode(got), text) << c["source"];
    }
}

TEST_F(ModelTokenizer, KnowsTheChatTokens) {
    for (const char* t : {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"})
        EXPECT_GE(tok_->find_token(t), n_vocab_ - 9) << t;
    const int32_t im_start = tok_->find_token("<|im_start|>");
    const int32_t im_end = tok_->find_token("<|im_end|>");
    std::vector<int32_t> ids = tok_->encode("<|im_start|>user\nHi<|im_end|>", true, true);
    ASSERT_GE(ids.size(), 3u);
    EXPECT_EQ(ids.front(), im_start);
    EXPECT_EQ(ids.back(), im_end);
    EXPECT_TRUE(tok_->is_eog(im_end));
    EXPECT_EQ(tok_->bos(), -1);
}

}  // namespace
