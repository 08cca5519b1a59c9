// Model loading: hyper-parameters and layer patterns read from tiny in-memory files, tensor
// binding (tied head, MTP blocks skipped), and one clear dl::Error for every kind of bad file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "core/error.h"
#include "model/model.h"
#include "model/tiny_model.h"

namespace dl {
namespace {

using test::TinySpec;

// The message of the dl::Error that loading the spec throws ("" when it loads).
std::string load_error(const TinySpec& s) {
    try {
        test::tiny_model(s);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// Per trunk layer: true where it is a DeltaNet layer.
std::vector<bool> recurrent(const Hparams& hp) {
    std::vector<bool> r;
    for (LayerKind k : hp.layer_kinds) r.push_back(k == LayerKind::deltanet);
    return r;
}

uint64_t file_tensor_bytes(const Model& m) {
    uint64_t n = 0;
    for (const Tensor& t : m.tensors()) n += t.nbytes;
    return n;
}

TEST(Model, Qwen35HparamsAndPattern) {
    TinySpec s;
    s.n_layer = 8;
    auto m = test::tiny_model(s);
    const Hparams& hp = m->hp;
    EXPECT_EQ(hp.arch, Arch::qwen35);
    EXPECT_EQ(hp.arch_name, "qwen35");
    EXPECT_EQ(hp.model_name, "tiny-qwen35");
    EXPECT_EQ(hp.n_layer, 8);
    EXPECT_EQ(hp.n_embd, 64);
    EXPECT_EQ(hp.n_ff, 96);
    EXPECT_EQ(hp.n_vocab, 80);
    EXPECT_EQ(hp.n_head, 4);
    EXPECT_EQ(hp.n_head_kv, 2);
    EXPECT_EQ(hp.head_dim, 32);
    EXPECT_EQ(hp.rope_dims, 8);
    EXPECT_EQ(hp.ssm_n_k_heads, 2);
    EXPECT_EQ(hp.ssm_n_v_heads, 4);
    EXPECT_EQ(hp.ssm_d_state, 16);
    EXPECT_EQ(hp.conv_dim(), 2 * 2 * 16 + 4 * 16);
    EXPECT_FLOAT_EQ(hp.rope_base, 10000.f);
    EXPECT_FLOAT_EQ(hp.rms_eps, 1e-6f);
    std::vector<bool> want{true, true, true, false, true, true, true, false};
    EXPECT_EQ(recurrent(hp), want);
    EXPECT_FALSE(hp.tied_embeddings);
    EXPECT_TRUE(hp.attn_output_gate);
    EXPECT_TRUE(hp.qk_norm);
    EXPECT_EQ(hp.rope_style, RopeStyle::neox);
    EXPECT_EQ(hp.ffn_kind, FfnKind::swiglu);
    ASSERT_EQ(m->layers.size(), 8u);
    EXPECT_NE(m->layers[0].ssm_qkv, nullptr);
    EXPECT_EQ(m->layers[0].wq, nullptr);
    EXPECT_NE(m->layers[3].wq, nullptr);
    EXPECT_EQ(m->layers[3].ssm_qkv, nullptr);
    EXPECT_EQ(m->layers[3].wq->rows(), 4 * 32 * 2);
    EXPECT_EQ(m->layers[0].ssm_conv1d->cols(), 4);
    EXPECT_NE(m->output, m->tok_embd);
    // Every tensor of the file is read by the trunk.
    EXPECT_EQ(m->weight_bytes(), file_tensor_bytes(*m));
}

TEST(Model, ExplicitLayerArrayGivesTheSamePattern) {
    TinySpec s;
    s.n_layer = 8;
    s.per_layer_kv_array = true;
    auto m = test::tiny_model(s);
    std::vector<bool> want{true, true, true, false, true, true, true, false};
    EXPECT_EQ(recurrent(m->hp), want);
    EXPECT_EQ(m->hp.n_head_kv, 2);
}

TEST(Model, OtherIntervalPattern) {
    TinySpec s;
    s.n_layer = 6;
    s.interval = 2;
    auto m = test::tiny_model(s);
    std::vector<bool> want{true, false, true, false, true, false};
    EXPECT_EQ(recurrent(m->hp), want);
}

TEST(Model, TiedHeadUsesTheEmbedding) {
    TinySpec s;
    s.tied = true;
    auto m = test::tiny_model(s);
    EXPECT_TRUE(m->hp.tied_embeddings);
    EXPECT_EQ(m->output, m->tok_embd);
    EXPECT_EQ(m->weight_bytes(), file_tensor_bytes(*m));
}

TEST(Model, MtpBlocksAreNotPartOfTheTrunk) {
    TinySpec s;
    s.n_nextn = 1;  // block 4 (an attention-pattern slot would be 3; 4 is a GDN block)
    auto m = test::tiny_model(s);
    EXPECT_EQ(m->hp.n_layer, 4);
    EXPECT_EQ(m->hp.n_nextn, 1);
    EXPECT_EQ(m->layers.size(), 4u);
    EXPECT_NE(m->find("blk.4.attn_qkv.weight"), nullptr);
    EXPECT_LT(m->weight_bytes(), file_tensor_bytes(*m));
}

TEST(Model, Qwen3AndLlama) {
    TinySpec q3;
    q3.arch = "qwen3";
    q3.n_layer = 2;
    q3.rope_dims = q3.head_dim;
    auto m3 = test::tiny_model(q3);
    EXPECT_EQ(m3->hp.arch, Arch::qwen3);
    EXPECT_EQ(recurrent(m3->hp), std::vector<bool>(2, false));
    EXPECT_TRUE(m3->hp.qk_norm);
    EXPECT_FALSE(m3->hp.attn_output_gate);
    EXPECT_EQ(m3->hp.rope_style, RopeStyle::neox);
    EXPECT_NE(m3->layers[1].q_norm, nullptr);
    EXPECT_EQ(m3->layers[1].wq->rows(), 4 * 32);

    TinySpec ll = q3;
    ll.arch = "llama";
    ll.rope_freqs = true;
    auto ml = test::tiny_model(ll);
    EXPECT_EQ(ml->hp.arch, Arch::llama);
    EXPECT_EQ(ml->layers[0].q_norm, nullptr);
    EXPECT_FALSE(ml->hp.qk_norm);
    EXPECT_FALSE(ml->hp.attn_output_gate);
    EXPECT_EQ(ml->hp.rope_style, RopeStyle::interleaved);
    ASSERT_NE(ml->rope_freqs, nullptr);
    EXPECT_EQ(ml->rope_freqs->cols(), 16);
    EXPECT_EQ(ml->weight_bytes(), file_tensor_bytes(*ml));
}

TEST(Model, MissingTensorIsNamed) {
    TinySpec s;
    s.drop_tensor = "blk.2.ssm_beta.weight";
    std::string e = load_error(s);
    EXPECT_NE(e.find("blk.2.ssm_beta.weight"), std::string::npos) << e;
    EXPECT_NE(e.find("missing"), std::string::npos) << e;

    s.drop_tensor = "blk.3.attn_k_norm.weight";
    e = load_error(s);
    EXPECT_NE(e.find("blk.3.attn_k_norm.weight"), std::string::npos) << e;

    s.drop_tensor = "token_embd.weight";
    e = load_error(s);
    EXPECT_NE(e.find("token_embd.weight"), std::string::npos) << e;
}

TEST(Model, WrongShapeIsNamed) {
    for (const char* name : {"blk.1.attn_qkv.weight", "blk.3.attn_q.weight", "blk.0.ssm_a",
                             "blk.0.ssm_conv1d.weight", "output.weight", "blk.2.ffn_down.weight"}) {
        TinySpec s;
        s.widen_tensor = name;
        std::string e = load_error(s);
        EXPECT_NE(e.find(name), std::string::npos) << e;
        EXPECT_NE(e.find("shape"), std::string::npos) << e;
    }
}

TEST(Model, UnknownArchitecture) {
    TinySpec s;
    s.arch_override = "mamba9";
    std::string e = load_error(s);
    EXPECT_NE(e.find("mamba9"), std::string::npos) << e;
    EXPECT_NE(e.find("not supported"), std::string::npos) << e;
}

TEST(Model, TypeTheCpuCannotMultiply) {
    // Q8_K is an activation format: it dequantizes but has no weight dot product.
    TinySpec s;
    s.n_embd = 256;
    s.n_ff = 256;
    s.matrix_type = QType::Q8_K;
    s.H_v = 4;
    s.d_state = 64;
    s.n_head = 4;
    s.head_dim = 64;
    std::string e = load_error(s);
    EXPECT_NE(e.find("q8_K"), std::string::npos) << e;
    EXPECT_NE(e.find("cannot compute"), std::string::npos) << e;
}

TEST(Model, InconsistentHparams) {
    TinySpec s;
    s.H_k = 3;  // 4 value heads cannot share 3 key heads
    EXPECT_NE(load_error(s).find("key heads"), std::string::npos);
    TinySpec t;
    t.n_nextn = 4;
    t.n_layer = 0;
    EXPECT_NE(load_error(t).find("MTP"), std::string::npos);
}

TEST(Model, LoadFromFileWithProgress) {
    const char* tmp = std::getenv("DELTALLM_TEST_TMP");
    std::string path = std::string(tmp ? tmp : "/tmp") + "/model_test_tiny.gguf";
    {
        auto bytes = test::tiny_gguf(TinySpec{});
        std::ofstream f(path, std::ios::binary);
        f.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
    }
    std::vector<double> seen;
    auto m = Model::load(path, [&](double f) { seen.push_back(f); });
    EXPECT_EQ(m->hp.n_layer, 4);
    ASSERT_FALSE(seen.empty());
    EXPECT_DOUBLE_EQ(seen.back(), 1.0);
    for (size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i], seen[i - 1]);
    EXPECT_THROW(Model::load(path + ".absent"), Error);
}

}  // namespace
}  // namespace dl
