// Quantization mixes against ground truth: the tensor types llama.cpp's quantizer chose for real
// Qwen3.5 0.8B (tied embeddings) and 9B files in Q4_K_M (tests/data/quant/*.types.json), plus the
// documented rules of the other mixes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "quant/mix.h"

namespace dl::quant {
namespace {

nlohmann::json load(const std::string& file) {
    const char* dir = std::getenv("DELTALLM_TEST_DATA");
    std::string path = std::string(dir ? dir : "tests/data") + "/quant/" + file;
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << path;
    return nlohmann::json::parse(in);
}

void check_file(const std::string& file) {
    auto j = load(file);
    ASSERT_GT(j.size(), 100u);
    int n_layer = 0;
    bool has_output = false;
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& name = it.key();
        if (name == "output.weight") has_output = true;
        if (name.rfind("blk.", 0) == 0) n_layer = std::max(n_layer, std::stoi(name.substr(4)) + 1);
    }
    int checked = 0, mismatches = 0;
    for (auto it = j.begin(); it != j.end(); ++it) {
        std::vector<int64_t> ne = it.value()["ne"].get<std::vector<int64_t>>();
        MixTensor t{"qwen35", it.key(), ne, n_layer, has_output, 0};
        QType got = mix_tensor_type(Mix::q4_k_m, t);
        std::string want = it.value()["type"].get<std::string>();
        if (qtype_name(got) != want) {
            ++mismatches;
            ADD_FAILURE() << file << ": " << it.key() << " expected " << want << " got "
                          << qtype_name(got);
        }
        ++checked;
    }
    std::printf("  %s: %d tensors, %d layers, %d mismatches\n", file.c_str(), checked, n_layer,
                mismatches);
}

TEST(Mix, Qwen35_0_8B_Q4_K_M) {
    check_file("qwen35-0.8b.q4_k_m.types.json");
}
TEST(Mix, Qwen35_9B_Q4_K_M) {
    check_file("qwen35-9b.q4_k_m.types.json");
}

QType type_of(Mix m, std::string_view name, std::vector<int64_t> ne, int n_layer = 32,
              bool has_output = true) {
    return mix_tensor_type(m, MixTensor{"llama", name, ne, n_layer, has_output, 0});
}

TEST(Mix, Names) {
    EXPECT_EQ(parse_mix("q4_k_m"), Mix::q4_k_m);
    EXPECT_EQ(parse_mix("Q4_K_M"), Mix::q4_k_m);
    EXPECT_EQ(parse_mix("bf16"), Mix::bf16);
    EXPECT_THROW(parse_mix("q4_k_x"), Error);
    EXPECT_EQ(list_mixes().size(), 10u);
    for (Mix m : list_mixes()) EXPECT_EQ(parse_mix(mix_name(m)), m);
    EXPECT_EQ(mix_file_type(Mix::q4_k_m), 15u);
    EXPECT_EQ(mix_file_type(Mix::f16), 1u);
    EXPECT_EQ(mix_base_type(Mix::q5_k_s), QType::Q5_K);
}

TEST(Mix, FloatMixes) {
    EXPECT_EQ(type_of(Mix::f16, "blk.0.attn_q.weight", {4096, 4096}), QType::F16);
    EXPECT_EQ(type_of(Mix::bf16, "token_embd.weight", {4096, 1000}), QType::BF16);
    EXPECT_EQ(type_of(Mix::f16, "blk.0.attn_norm.weight", {4096}), QType::F32);
    EXPECT_EQ(type_of(Mix::f32, "output.weight", {4096, 1000}), QType::F32);
}

TEST(Mix, KeptInFloat) {
    for (Mix m : list_mixes()) {
        EXPECT_EQ(type_of(m, "blk.0.ssm_conv1d.weight", {4, 8192}), QType::F32);
        EXPECT_EQ(type_of(m, "blk.0.ssm_a", {32}), QType::F32);
        EXPECT_EQ(type_of(m, "blk.0.ssm_dt.bias", {32}), QType::F32);
        EXPECT_EQ(type_of(m, "blk.0.ffn_norm.weight", {4096}), QType::F32);
        EXPECT_EQ(type_of(m, "blk.0.ffn_gate_inp.weight", {4096, 64}), QType::F32);
    }
}

TEST(Mix, OutputAndEmbedding) {
    EXPECT_EQ(type_of(Mix::q4_0, "output.weight", {4096, 32000}), QType::Q6_K);
    EXPECT_EQ(type_of(Mix::q8_0, "output.weight", {4096, 32000}), QType::Q8_0);
    EXPECT_EQ(type_of(Mix::q4_k_s, "token_embd.weight", {4096, 32000}), QType::Q4_K);
    EXPECT_EQ(type_of(Mix::q4_k_s, "token_embd.weight", {4096, 32000}, 32, false), QType::Q6_K);
    // an output row the K block does not divide: Q8_0
    EXPECT_EQ(type_of(Mix::q4_k_m, "output.weight", {4000, 32000}), QType::Q8_0);
}

TEST(Mix, MoreBitsLayers) {
    // 32 layers: use_more_bits holds for 0-3, 28-31 and 6, 9, ..., 27.
    EXPECT_EQ(type_of(Mix::q4_k_m, "blk.0.attn_v.weight", {4096, 1024}), QType::Q6_K);
    EXPECT_EQ(type_of(Mix::q4_k_m, "blk.4.attn_v.weight", {4096, 1024}), QType::Q4_K);
    EXPECT_EQ(type_of(Mix::q4_k_m, "blk.6.ffn_down.weight", {14336, 4096}), QType::Q6_K);
    EXPECT_EQ(type_of(Mix::q4_k_m, "blk.7.ffn_down.weight", {14336, 4096}), QType::Q4_K);
    EXPECT_EQ(type_of(Mix::q5_k_m, "blk.31.ffn_down.weight", {14336, 4096}), QType::Q6_K);
    EXPECT_EQ(type_of(Mix::q5_k_m, "blk.5.ffn_down.weight", {14336, 4096}), QType::Q5_K);
    EXPECT_EQ(type_of(Mix::q5_k_s, "blk.0.ffn_down.weight", {14336, 4096}), QType::Q5_K);
    // q4_k_s: attn_v of the first 4 layers and ffn_down of the first eighth get Q5_K
    EXPECT_EQ(type_of(Mix::q4_k_s, "blk.3.attn_v.weight", {4096, 1024}), QType::Q5_K);
    EXPECT_EQ(type_of(Mix::q4_k_s, "blk.4.attn_v.weight", {4096, 1024}), QType::Q4_K);
    EXPECT_EQ(type_of(Mix::q4_k_s, "blk.3.ffn_down.weight", {14336, 4096}), QType::Q5_K);
    EXPECT_EQ(type_of(Mix::q4_k_s, "blk.4.ffn_down.weight", {14336, 4096}), QType::Q4_K);
    EXPECT_EQ(type_of(Mix::q6_k, "blk.0.attn_v.weight", {4096, 1024}), QType::Q6_K);
}

TEST(Mix, Fallbacks) {
    // row lengths that 256 does not divide
    EXPECT_EQ(type_of(Mix::q4_k_m, "blk.5.attn_q.weight", {4000, 4096}), QType::Q5_0);
    EXPECT_EQ(type_of(Mix::q5_k_s, "blk.5.attn_q.weight", {4000, 4096}), QType::Q5_1);
    EXPECT_EQ(type_of(Mix::q6_k, "blk.5.attn_q.weight", {4000, 4096}), QType::Q8_0);
    EXPECT_EQ(type_of(Mix::q4_k_m, "blk.0.attn_v.weight", {4000, 1024}), QType::Q8_0);
    // not even 32
    EXPECT_EQ(type_of(Mix::q4_k_m, "blk.5.attn_q.weight", {4001, 4096}), QType::F16);
    EXPECT_EQ(type_of(Mix::q8_0, "blk.5.attn_q.weight", {4001, 4096}), QType::F16);
    EXPECT_EQ(type_of(Mix::q8_0, "blk.5.attn_q.weight", {4000, 4096}), QType::Q8_0);
}

}  // namespace
}  // namespace dl::quant
