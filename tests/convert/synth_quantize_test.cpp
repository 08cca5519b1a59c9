// Synthetic models (types of a real Q4_K_M file, sane values, a forward that stays finite) and
// re-quantization (metadata kept, values within the format's error, same-type copies exact).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "convert/convert.h"
#include "core/error.h"
#include "cpu/chain.h"
#include "gguf/gguf.h"
#include "hf_folder.h"
#include "model/model.h"
#include "quant/mix.h"
#include "quant/quant.h"

namespace {

namespace fs = std::filesystem;

std::string tmp(const std::string& name) {
    return (fs::path(testhf::tmp_root()) / name).string();
}

std::vector<float> dequant(const dl::gguf::TensorInfo& t) {
    std::vector<float> v((size_t)t.n_elements());
    if (t.type == dl::QType::F32)
        std::memcpy(v.data(), t.data, v.size() * 4);
    else
        dl::quant::dequantize(t.type, t.data, v.data(), t.n_elements());
    return v;
}

void mean_sd(const std::vector<float>& v, double& mean, double& sd) {
    double s = 0, s2 = 0;
    for (float x : v) {
        s += x;
        s2 += (double)x * x;
    }
    mean = s / (double)v.size();
    sd = std::sqrt(std::max(0.0, s2 / (double)v.size() - mean * mean));
}

// Every tensor gets the type the q4_k_m rules give it, and random blocks decode to values of the
// intended spread (1/sqrt(fan_in) for matrices) with mean near zero.
TEST(Synth, TinyQwen35TypesAndValueSpread) {
    dl::convert::SynthOptions o;
    o.arch = "qwen35";
    o.shape = "tiny";
    o.type = "q4_k_m";
    std::vector<uint8_t> bytes = dl::convert::synth_to_bytes(o);
    dl::gguf::File f = dl::gguf::File::parse(bytes.data(), bytes.size());
    EXPECT_EQ(f.get_string("general.architecture"), "qwen35");
    EXPECT_EQ(f.get_int("general.file_type"),
              (int64_t)dl::quant::mix_file_type(dl::quant::Mix::q4_k_m));
    EXPECT_EQ(f.get_array("tokenizer.ggml.tokens").size(), 1024u);
    EXPECT_EQ(f.get_array("tokenizer.ggml.merges").size(), 1024u - 256u - 5u);
    bool has_output = f.tensor("output.weight") != nullptr;
    int n_k = 0;
    for (const auto& t : f.tensors()) {
        dl::quant::MixTensor mt;
        mt.arch = "qwen35";
        mt.name = t.name;
        mt.ne = t.ne;
        mt.n_layer = 4;
        mt.has_output = has_output;
        EXPECT_EQ(t.type, dl::quant::mix_tensor_type(dl::quant::Mix::q4_k_m, mt)) << t.name;
        std::vector<float> v = dequant(t);
        for (float x : v) ASSERT_TRUE(std::isfinite(x)) << t.name;
        if (t.ne.size() == 2 && t.name.find("conv1d") == std::string::npos) {
            double mean, sd, sigma = 1.0 / std::sqrt((double)t.ne[0]);
            mean_sd(v, mean, sd);
            EXPECT_GT(sd, 0.6 * sigma) << t.name;
            EXPECT_LT(sd, 1.6 * sigma) << t.name;
            EXPECT_LT(std::fabs(mean), 0.15 * sigma) << t.name;
            n_k += t.type == dl::QType::Q4_K || t.type == dl::QType::Q6_K;
        }
    }
    EXPECT_GT(n_k, 10);
    std::vector<float> a = dequant(*f.tensor("blk.0.ssm_a"));
    for (float x : a) EXPECT_LT(x, 0.f);
}

// The synthetic model loads and runs: logits finite and not degenerate for a short prompt.
TEST(Synth, TinyModelsRunOnTheCpuChain) {
    for (const char* arch : {"qwen35", "qwen3", "llama"}) {
        dl::convert::SynthOptions o;
        o.arch = arch;
        o.shape = "tiny";
        o.type = "q8_0";
        const std::string path = tmp(std::string("synth_tiny_") + arch + ".gguf");
        dl::convert::synth(o, path);
        auto model = dl::Model::load(path);
        dl::cpu::Chain chain(model);
        auto s = chain.new_session(64);
        std::vector<int32_t> ids = {1, 200, 3, 999, 42, 7, 7, 500};
        std::vector<float> logits;
        chain.prefill(*s, ids, dl::LogitsRows::last, logits);
        double mean, sd;
        mean_sd(logits, mean, sd);
        for (float x : logits) ASSERT_TRUE(std::isfinite(x)) << arch;
        EXPECT_GT(sd, 0.05) << arch;
        EXPECT_LT(sd, 50.0) << arch;
        fs::remove(path);
    }
}

// Mixture-of-experts shapes: the q4_k_m mix keeps the router in f32 (llama-quantize never
// quantizes ffn_gate_inp), gives the expert down stacks of the "more bits" layers (2 and 3 of 4)
// Q6_K as it does ffn_down, and the rest Q4_K; the files load as experts and run finite.
TEST(Synth, TinyMoeModelsTypesAndRun) {
    for (const char* arch : {"qwen35moe", "qwen3moe"}) {
        dl::convert::SynthOptions o;
        o.arch = arch;
        o.shape = "tiny";
        o.type = "q4_k_m";
        const std::string path = tmp(std::string("synth_tiny_") + arch + ".gguf");
        dl::convert::synth(o, path);
        {
            dl::gguf::File f = dl::gguf::File::open(path);
            EXPECT_EQ(f.get_int(std::string(arch) + ".expert_count"), 8);
            for (int il = 0; il < 4; ++il) {
                const std::string b = "blk." + std::to_string(il) + ".";
                auto type = [&](const std::string& n) {
                    const auto* t = f.tensor(b + n);
                    EXPECT_TRUE(t) << b + n;
                    return t ? t->type : dl::QType::F32;
                };
                EXPECT_EQ(type("ffn_gate_inp.weight"), dl::QType::F32) << arch;
                EXPECT_EQ(type("ffn_gate_exps.weight"), dl::QType::Q4_K) << arch;
                EXPECT_EQ(type("ffn_up_exps.weight"), dl::QType::Q4_K) << arch;
                EXPECT_EQ(type("ffn_down_exps.weight"), il >= 2 ? dl::QType::Q6_K : dl::QType::Q4_K)
                    << arch << " layer " << il;
                const bool shared = std::string(arch) == "qwen35moe";
                EXPECT_EQ(f.tensor(b + "ffn_gate_inp_shexp.weight") != nullptr, shared);
                if (shared) {
                    EXPECT_EQ(type("ffn_gate_inp_shexp.weight"), dl::QType::F32);
                }
            }
        }
        auto model = dl::Model::load(path);
        EXPECT_EQ(model->hp.ffn_kind, dl::FfnKind::experts);
        dl::cpu::Chain chain(model);
        auto s = chain.new_session(32);
        std::vector<int32_t> ids = {1, 200, 3, 999, 42, 7};
        std::vector<float> logits;
        chain.prefill(*s, ids, dl::LogitsRows::last, logits);
        double mean, sd;
        mean_sd(logits, mean, sd);
        for (float x : logits) ASSERT_TRUE(std::isfinite(x)) << arch;
        EXPECT_GT(sd, 0.05) << arch;
        fs::remove(path);
    }
}

// A real Qwen3.5-0.8B Q4_K_M file's tensor names, shapes and types (llama.cpp's choices,
// tests/data/quant/qwen35-0.8b.q4_k_m.types.json, shared with the mix tests) must be exactly those
// of the synthetic file.
TEST(Synth, Qwen35_0_8B_MatchesRealQ4KMFile) {
    const char* data = std::getenv("DELTALLM_TEST_DATA");
    std::ifstream jf(fs::path(data ? data : "tests/data") / "quant" /
                     "qwen35-0.8b.q4_k_m.types.json");
    ASSERT_TRUE(jf.good());
    nlohmann::json want = nlohmann::json::parse(jf);
    dl::convert::SynthOptions o;
    o.arch = "qwen35";
    o.shape = "0.8b";
    o.type = "q4_k_m";
    const std::string path = tmp("synth_qwen35_0.8b.gguf");
    dl::convert::synth(o, path);
    {
        dl::gguf::File f = dl::gguf::File::open(path);
        EXPECT_EQ(f.tensors().size(), want.size());
        for (const auto& t : f.tensors()) {
            ASSERT_TRUE(want.contains(t.name)) << "unexpected tensor " << t.name;
            const auto& w = want[t.name];
            std::vector<int64_t> ne = w["ne"].get<std::vector<int64_t>>();
            for (size_t i = 0; i < ne.size(); ++i)
                EXPECT_EQ(i < t.ne.size() ? t.ne[i] : 1, ne[i]) << t.name << " dim " << i;
            EXPECT_EQ(std::string(dl::qtype_name(t.type)), w["type"].get<std::string>()) << t.name;
        }
        EXPECT_EQ(f.get_array("tokenizer.ggml.tokens").size(), 248320u);
    }
    fs::remove(path);
}

TEST(Synth, UnknownShapeOrArchIsOneSentence) {
    dl::convert::SynthOptions o;
    o.arch = "qwen35";
    o.shape = "13b";
    try {
        dl::convert::synth_to_bytes(o);
        FAIL();
    } catch (const dl::Error& e) {
        EXPECT_NE(std::string(e.what()).find("unknown shape '13b'"), std::string::npos) << e.what();
    }
    o.arch = "gpt2";
    EXPECT_THROW(dl::convert::synth_to_bytes(o), dl::Error);
}

// The real shapes hold the weight counts their model cards publish (the Qwen3.5 totals include a
// vision tower and a prediction layer the text model does not have: within 3 %).
TEST(Synth, RealShapesHoldTheirPublishedWeightCounts) {
    struct Published {
        const char *arch, *shape;
        double weights;
    };
    for (const Published& p : {Published{"qwen3", "8b", 8.2e9},
                               {"llama", "8b", 8.03e9},
                               {"qwen3moe", "30b-a3b", 30.5e9},
                               {"qwen35moe", "35b-a3b", 35e9},
                               {"qwen35moe", "122b-a10b", 122e9}}) {
        dl::convert::SynthOptions o;
        o.arch = p.arch;
        o.shape = p.shape;
        const double n = (double)dl::convert::synth_weight_count(o);
        EXPECT_NEAR(n / p.weights, 1.0, 0.03) << p.arch << " " << p.shape << ": " << n;
    }
}

// f32 -> q8_0 -> f32: values within Q8_0's rounding, metadata carried over, file type updated;
// q8_0 -> q8_0 copies blocks bit for bit; f32 -> q4_k_m follows the mix.
TEST(Quantize, RoundTrip) {
    dl::convert::SynthOptions o;
    o.arch = "qwen3";
    o.shape = "tiny";
    o.type = "f32";
    const std::string f32 = tmp("rq_f32.gguf"), q8 = tmp("rq_q8.gguf"), q8b = tmp("rq_q8b.gguf"),
                      q4 = tmp("rq_q4km.gguf");
    dl::convert::synth(o, f32);
    dl::convert::quantize_gguf(f32, q8, "q8_0");
    dl::convert::quantize_gguf(q8, q8b, "Q8_0");
    dl::convert::quantize_gguf(f32, q4, "q4_k_m");
    {
        dl::gguf::File a = dl::gguf::File::open(f32), b = dl::gguf::File::open(q8),
                       c = dl::gguf::File::open(q8b), d = dl::gguf::File::open(q4);
        EXPECT_EQ(b.get_int("general.file_type"), 7);
        EXPECT_EQ(b.get_string("tokenizer.chat_template"), a.get_string("tokenizer.chat_template"));
        EXPECT_EQ(b.get_array("tokenizer.ggml.tokens").size(),
                  a.get_array("tokenizer.ggml.tokens").size());
        EXPECT_EQ(b.get_int("qwen3.block_count"), a.get_int("qwen3.block_count"));
        ASSERT_EQ(a.tensors().size(), b.tensors().size());
        for (const auto& ta : a.tensors()) {
            const auto* tb = b.tensor(ta.name);
            ASSERT_NE(tb, nullptr);
            EXPECT_EQ(tb->ne, ta.ne);
            std::vector<float> x = dequant(ta), y = dequant(*tb);
            if (ta.ne.size() == 1) {
                EXPECT_EQ(tb->type, dl::QType::F32);
                EXPECT_EQ(x, y) << ta.name;
                continue;
            }
            EXPECT_EQ(tb->type, dl::QType::Q8_0) << ta.name;
            // Q8_0: per block of 32, error at most half a step of amax/127 (plus f16 scale
            // rounding): relative RMS error well under 1%.
            double e2 = 0, x2 = 0;
            for (size_t i = 0; i < x.size(); ++i) {
                e2 += (double)(x[i] - y[i]) * (x[i] - y[i]);
                x2 += (double)x[i] * x[i];
            }
            EXPECT_LT(std::sqrt(e2 / x2), 0.01) << ta.name;
            const auto* tc = c.tensor(ta.name);
            ASSERT_EQ(tc->nbytes, tb->nbytes);
            EXPECT_EQ(std::memcmp(tc->data, tb->data, tb->nbytes), 0) << ta.name;
        }
        for (const auto& t : d.tensors()) {
            dl::quant::MixTensor mt;
            mt.arch = "qwen3";
            mt.name = t.name;
            mt.ne = t.ne;
            mt.n_layer = 4;
            mt.has_output = d.tensor("output.weight") != nullptr;
            EXPECT_EQ(t.type, dl::quant::mix_tensor_type(dl::quant::Mix::q4_k_m, mt)) << t.name;
        }
    }
    for (const auto& p : {f32, q8, q8b, q4}) fs::remove(p);
}

}  // namespace
