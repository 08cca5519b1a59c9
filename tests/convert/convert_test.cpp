// Import of hand-built Hugging Face folders: every Qwen3.5 transform checked against values the
// test computes itself (ssm_a = -exp(A_log), +1 on the zero-centred norms only, the value-head
// order for H_v != H_k written out by hand), Llama's q/k row order, the tokenizer metadata, and
// the one-sentence errors.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "convert/convert.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "hf_folder.h"
#include "model/model.h"

namespace {

using testhf::floats_of;
using testhf::ramp;
using testhf::StTensor;

// Qwen3.5 text model inside a multimodal checkpoint (nested text_config, language_model prefix,
// vision and MTP tensors that must be left out). H_k = 2, H_v = 4, head dims 2.
struct Qwen35Folder {
    static constexpr int64_t E = 8, V = 104, FF = 16, D = 8, Hk = 2, Hv = 4, dk = 2, K = 4;
    static constexpr int64_t conv_dim = 2 * Hk * dk + Hv * dk;  // 16
    std::string dir = testhf::tmp_root() + "/convert_qwen35";
    std::map<std::string, StTensor> ts;

    Qwen35Folder() {
        const std::string p = "model.language_model.";
        auto put = [&](const std::string& n, std::vector<int64_t> shape, float base,
                       const char* dtype = "F32") {
            size_t count = 1;
            for (int64_t d : shape) count *= (size_t)d;
            ts[n] = StTensor{dtype, shape, ramp(count, base)};
        };
        put(p + "embed_tokens.weight", {V, E}, 0.1f);
        put(p + "norm.weight", {E}, 0.2f);
        put("lm_head.weight", {V, E}, -0.3f);
        put("model.visual.blocks.0.attn.qkv.weight", {4, 4}, 1.f);
        put("mtp.fc.weight", {E, 2 * E}, 1.f);
        const std::string l0 = p + "layers.0.", la = l0 + "linear_attn.";
        put(l0 + "input_layernorm.weight", {E}, 0.01f);
        put(l0 + "post_attention_layernorm.weight", {E}, 0.02f);
        put(la + "in_proj_qkv.weight", {conv_dim, E}, 0.5f, "BF16");
        put(la + "in_proj_z.weight", {Hv * dk, E}, 0.6f);
        put(la + "in_proj_b.weight", {Hv, E}, 0.7f);
        put(la + "in_proj_a.weight", {Hv, E}, 0.8f);
        put(la + "conv1d.weight", {conv_dim, 1, K}, 0.9f);
        put(la + "dt_bias", {Hv}, 1.1f, "F16");
        ts[la + "A_log"] = StTensor{"F32", {Hv}, {0.f, 1.f, 2.f, 3.f}};
        put(la + "norm.weight", {dk}, 1.3f);
        put(la + "out_proj.weight", {E, Hv * dk}, 1.4f);
        const std::string l1 = p + "layers.1.", sa = l1 + "self_attn.";
        put(l1 + "input_layernorm.weight", {E}, 0.03f);
        put(l1 + "post_attention_layernorm.weight", {E}, 0.04f);
        put(sa + "q_proj.weight", {2 * D * 2, E}, 1.5f);
        put(sa + "k_proj.weight", {D, E}, 1.6f);
        put(sa + "v_proj.weight", {D, E}, 1.7f);
        put(sa + "o_proj.weight", {E, 2 * D}, 1.8f);
        put(sa + "q_norm.weight", {D}, 0.05f);
        put(sa + "k_norm.weight", {D}, 0.06f);
        for (const std::string& l : {l0, l1}) {
            put(l + "mlp.gate_proj.weight", {FF, E}, 2.1f);
            put(l + "mlp.up_proj.weight", {FF, E}, 2.2f);
            put(l + "mlp.down_proj.weight", {E, FF}, 2.3f);
        }
    }
    nlohmann::json config() const {
        nlohmann::json text = {
            {"model_type", "qwen3_5_text"},
            {"hidden_size", E},
            {"num_hidden_layers", 2},
            {"intermediate_size", FF},
            {"num_attention_heads", 2},
            {"num_key_value_heads", 1},
            {"head_dim", D},
            {"linear_num_key_heads", Hk},
            {"linear_num_value_heads", Hv},
            {"linear_key_head_dim", dk},
            {"linear_value_head_dim", dk},
            {"linear_conv_kernel_dim", K},
            {"vocab_size", V},
            {"rms_norm_eps", 1e-6},
            {"layer_types", {"linear_attention", "full_attention"}},
            {"max_position_embeddings", 1024},
            {"rope_parameters",
             {{"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}, {"mrope_section", {1, 0, 0}}}}};
        return {{"architectures", {"Qwen3_5ForConditionalGeneration"}},
                {"model_type", "qwen3_5"},
                {"tie_word_embeddings", false},
                {"text_config", text}};
    }
    void write() const {
        testhf::write_folder(dir, config(), ts,
                             {{"eos_token", "<|im_end|>"}, {"chat_template", "{{ messages }}"}});
    }
    // The value a tensor had in the checkpoint, as the reader sees it (bf16/f16 rounded).
    std::vector<float> src(const std::string& name) const {
        const StTensor& t = ts.at(name);
        std::vector<float> v = t.values;
        for (float& x : v) {
            if (t.dtype == "BF16") x = dl::bf16_to_f32(dl::f32_to_bf16(x));
            if (t.dtype == "F16") x = dl::f16_to_f32(dl::f32_to_f16(x));
        }
        return v;
    }
};

// New value head n holds reference head kOrder[n]: with H_k = 2 key heads and 2 value heads per
// key head, the reference groups [k0: v0 v1][k1: v2 v3]; the file interleaves k0 k1 k0 k1.
constexpr int kOrder[4] = {0, 2, 1, 3};

class Qwen35Import : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        folder = new Qwen35Folder();
        folder->write();
        dl::convert::ConvertOptions o;
        o.type = "f32";
        bytes = new std::vector<uint8_t>(dl::convert::convert_hf_to_bytes(folder->dir, o));
        file = new dl::gguf::File(dl::gguf::File::parse(bytes->data(), bytes->size()));
    }
    static void TearDownTestSuite() {
        delete file;
        delete bytes;
        delete folder;
    }
    static Qwen35Folder* folder;
    static std::vector<uint8_t>* bytes;
    static dl::gguf::File* file;
    const std::string la = "model.language_model.layers.0.linear_attn.";
};
Qwen35Folder* Qwen35Import::folder;
std::vector<uint8_t>* Qwen35Import::bytes;
dl::gguf::File* Qwen35Import::file;

TEST_F(Qwen35Import, MetadataDescribesTheHybrid) {
    const dl::gguf::File& f = *file;
    EXPECT_EQ(f.get_string("general.architecture"), "qwen35");
    EXPECT_EQ(f.get_int("qwen35.block_count"), 2);
    EXPECT_EQ(f.get_int("qwen35.embedding_length"), 8);
    EXPECT_EQ(f.get_int("qwen35.feed_forward_length"), 16);
    EXPECT_EQ(f.get_int("qwen35.attention.head_count"), 2);
    EXPECT_EQ(f.get_int("qwen35.attention.head_count_kv"), 1);
    EXPECT_EQ(f.get_int("qwen35.attention.key_length"), 8);
    EXPECT_EQ(f.get_int("qwen35.rope.dimension_count"), 2);
    EXPECT_FLOAT_EQ((float)f.get_float("qwen35.rope.freq_base"), 1e7f);
    EXPECT_EQ(f.get_int("qwen35.ssm.conv_kernel"), 4);
    EXPECT_EQ(f.get_int("qwen35.ssm.state_size"), 2);
    EXPECT_EQ(f.get_int("qwen35.ssm.group_count"), 2);
    EXPECT_EQ(f.get_int("qwen35.ssm.time_step_rank"), 4);
    EXPECT_EQ(f.get_int("qwen35.ssm.inner_size"), 8);
    EXPECT_EQ(f.get_int("qwen35.full_attention_interval"), 2);
    EXPECT_EQ(f.get_int("general.file_type"), 0);
}

TEST_F(Qwen35Import, TensorSetLeavesOutVisionAndMtp) {
    EXPECT_EQ(file->tensors().size(), 28u);
    for (const auto& t : file->tensors()) {
        EXPECT_EQ(t.name.find("mtp"), std::string::npos);
        EXPECT_EQ(t.name.find("visual"), std::string::npos);
        EXPECT_EQ(t.type, dl::QType::F32) << t.name;
    }
    EXPECT_NE(file->tensor("output.weight"), nullptr);
    EXPECT_EQ(file->tensor("blk.0.attn_qkv.weight")->ne, (std::vector<int64_t>{8, 16}));
    EXPECT_EQ(file->tensor("blk.0.ssm_conv1d.weight")->ne, (std::vector<int64_t>{4, 16}));
    EXPECT_EQ(file->tensor("blk.0.ssm_out.weight")->ne, (std::vector<int64_t>{8, 8}));
    EXPECT_EQ(file->tensor("blk.1.attn_q.weight")->ne, (std::vector<int64_t>{8, 32}));
}

TEST_F(Qwen35Import, ZeroCentredNormsGetPlusOneButSsmNormDoesNot) {
    const std::string p = "model.language_model.";
    std::vector<std::pair<std::string, std::string>> plus_one = {
        {"blk.0.attn_norm.weight", p + "layers.0.input_layernorm.weight"},
        {"blk.0.post_attention_norm.weight", p + "layers.0.post_attention_layernorm.weight"},
        {"blk.1.attn_q_norm.weight", p + "layers.1.self_attn.q_norm.weight"},
        {"blk.1.attn_k_norm.weight", p + "layers.1.self_attn.k_norm.weight"},
        {"output_norm.weight", p + "norm.weight"}};
    for (const auto& [g, h] : plus_one) {
        std::vector<float> got = floats_of(*file, g), want = folder->src(h);
        ASSERT_EQ(got.size(), want.size()) << g;
        for (size_t i = 0; i < got.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i] + 1.f) << g;
    }
    EXPECT_EQ(floats_of(*file, "blk.0.ssm_norm.weight"), folder->src(la + "norm.weight"));
    EXPECT_EQ(floats_of(*file, "token_embd.weight"),
              folder->src("model.language_model.embed_tokens.weight"));
    EXPECT_EQ(floats_of(*file, "output.weight"), folder->src("lm_head.weight"));
}

TEST_F(Qwen35Import, SsmAIsMinusExpOfALogInFileHeadOrder) {
    std::vector<float> a = floats_of(*file, "blk.0.ssm_a");
    ASSERT_EQ(a.size(), 4u);
    for (int n = 0; n < 4; ++n) EXPECT_FLOAT_EQ(a[n], -std::exp((float)kOrder[n])) << n;
    std::vector<float> dt = floats_of(*file, "blk.0.ssm_dt.bias"),
                       dt_src = folder->src(la + "dt_bias");
    for (int n = 0; n < 4; ++n) EXPECT_EQ(dt[n], dt_src[kOrder[n]]);
}

TEST_F(Qwen35Import, ValueHeadsReorderedInEveryValueShapedTensor) {
    const int64_t E = 8, dv = 2;
    // attn_qkv: q and k rows (8) untouched, then v rows by head.
    std::vector<float> qkv = floats_of(*file, "blk.0.attn_qkv.weight"),
                       qkv_src = folder->src(la + "in_proj_qkv.weight");
    for (int64_t r = 0; r < 8; ++r)
        for (int64_t c = 0; c < E; ++c) EXPECT_EQ(qkv[r * E + c], qkv_src[r * E + c]);
    for (int n = 0; n < 4; ++n)
        for (int64_t i = 0; i < dv; ++i)
            for (int64_t c = 0; c < E; ++c)
                EXPECT_EQ(qkv[(8 + n * dv + i) * E + c], qkv_src[(8 + kOrder[n] * dv + i) * E + c]);
    // attn_gate rows by head; beta / alpha one row per head.
    std::vector<float> z = floats_of(*file, "blk.0.attn_gate.weight"),
                       z_src = folder->src(la + "in_proj_z.weight");
    for (int n = 0; n < 4; ++n)
        for (int64_t i = 0; i < dv * E; ++i)
            EXPECT_EQ(z[n * dv * E + i], z_src[kOrder[n] * dv * E + i]);
    for (auto [g, h] : {std::pair{"blk.0.ssm_beta.weight", "in_proj_b.weight"},
                        std::pair{"blk.0.ssm_alpha.weight", "in_proj_a.weight"}}) {
        std::vector<float> w = floats_of(*file, g), ws = folder->src(la + h);
        for (int n = 0; n < 4; ++n)
            for (int64_t c = 0; c < E; ++c) EXPECT_EQ(w[n * E + c], ws[kOrder[n] * E + c]) << g;
    }
    // conv taps: ne {4, 16}; channel rows 8.. are v channels.
    std::vector<float> conv = floats_of(*file, "blk.0.ssm_conv1d.weight"),
                       conv_src = folder->src(la + "conv1d.weight");
    for (int64_t ch = 0; ch < 8; ++ch)
        for (int k = 0; k < 4; ++k) EXPECT_EQ(conv[ch * 4 + k], conv_src[ch * 4 + k]);
    for (int n = 0; n < 4; ++n)
        for (int64_t i = 0; i < dv; ++i)
            for (int k = 0; k < 4; ++k)
                EXPECT_EQ(conv[(8 + n * dv + i) * 4 + k],
                          conv_src[(8 + kOrder[n] * dv + i) * 4 + k]);
    // ssm_out: the input columns by head.
    std::vector<float> out = floats_of(*file, "blk.0.ssm_out.weight"),
                       out_src = folder->src(la + "out_proj.weight");
    for (int64_t r = 0; r < E; ++r)
        for (int n = 0; n < 4; ++n)
            for (int64_t i = 0; i < dv; ++i)
                EXPECT_EQ(out[r * 8 + n * dv + i], out_src[r * 8 + kOrder[n] * dv + i]);
}

TEST_F(Qwen35Import, TokenizerMetadata) {
    const dl::gguf::File& f = *file;
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "qwen2");
    const dl::gguf::Array& tokens = f.get_array("tokenizer.ggml.tokens");
    ASSERT_EQ(tokens.size(), 104u);
    EXPECT_EQ(tokens.string_at(0), "!");
    EXPECT_EQ(tokens.string_at(96), "\xC4\xA0th");
    EXPECT_EQ(tokens.string_at(97), "<|im_end|>");
    EXPECT_EQ(tokens.string_at(98), "<think>");
    EXPECT_EQ(tokens.string_at(103), "[PAD103]");
    const dl::gguf::Array& types = f.get_array("tokenizer.ggml.token_type");
    ASSERT_EQ(types.size(), 104u);
    EXPECT_EQ(types.int_at(0), 1);
    EXPECT_EQ(types.int_at(97), 3);   // special: control
    EXPECT_EQ(types.int_at(98), 4);   // added, not special: user-defined
    EXPECT_EQ(types.int_at(100), 4);  // padding
    const dl::gguf::Array& merges = f.get_array("tokenizer.ggml.merges");
    ASSERT_EQ(merges.size(), 2u);
    EXPECT_EQ(merges.string_at(0), "t h");
    EXPECT_EQ(merges.string_at(1), "\xC4\xA0 th");
    EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 97);
    EXPECT_FALSE(f.has("tokenizer.ggml.bos_token_id"));
    EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_bos_token"));
    EXPECT_EQ(f.get_string("tokenizer.chat_template"), "{{ messages }}");
}

// Llama: q/k rows of each head go from rotate-half pairs (i, i + D/2) to adjacent pairs, i.e.
// within a head of 4 rows the file holds reference rows 0, 2, 1, 3.
TEST(LlamaImport, QueryKeyRowsPermutedForAdjacentPairRope) {
    const int64_t E = 8, V = 100, D = 4;
    std::map<std::string, StTensor> ts;
    auto put = [&](const std::string& n, std::vector<int64_t> shape, float base) {
        size_t c = 1;
        for (int64_t d : shape) c *= (size_t)d;
        ts[n] = StTensor{"F32", shape, ramp(c, base)};
    };
    put("model.embed_tokens.weight", {V, E}, 0.f);
    put("model.norm.weight", {E}, 1.f);
    const std::string l = "model.layers.0.";
    put(l + "input_layernorm.weight", {E}, 1.f);
    put(l + "post_attention_layernorm.weight", {E}, 1.5f);
    put(l + "self_attn.q_proj.weight", {2 * D, E}, 0.f);
    put(l + "self_attn.k_proj.weight", {D, E}, 0.5f);
    put(l + "self_attn.v_proj.weight", {D, E}, 0.f);
    put(l + "self_attn.o_proj.weight", {E, 2 * D}, 0.f);
    put(l + "mlp.gate_proj.weight", {16, E}, 0.f);
    put(l + "mlp.up_proj.weight", {16, E}, 0.f);
    put(l + "mlp.down_proj.weight", {E, 16}, 0.f);
    nlohmann::json cfg = {{"architectures", {"LlamaForCausalLM"}},
                          {"model_type", "llama"},
                          {"hidden_size", E},
                          {"num_hidden_layers", 1},
                          {"intermediate_size", 16},
                          {"num_attention_heads", 2},
                          {"num_key_value_heads", 1},
                          {"vocab_size", V},
                          {"rope_theta", 500000.0},
                          {"tie_word_embeddings", true}};
    const std::string dir = testhf::tmp_root() + "/convert_llama";
    testhf::write_folder(dir, cfg, ts, {{"bos_token", "<|im_end|>"}, {"add_bos_token", true}});
    dl::convert::ConvertOptions o;
    o.type = "f32";
    std::vector<uint8_t> bytes = dl::convert::convert_hf_to_bytes(dir, o);
    dl::gguf::File f = dl::gguf::File::parse(bytes.data(), bytes.size());
    const int rows[8] = {0, 2, 1, 3, 4, 6, 5, 7};
    std::vector<float> q = floats_of(f, "blk.0.attn_q.weight"),
                       qs = ts[l + "self_attn.q_proj.weight"].values;
    for (int r = 0; r < 8; ++r)
        for (int c = 0; c < E; ++c) EXPECT_EQ(q[r * E + c], qs[rows[r] * E + c]) << r;
    std::vector<float> k = floats_of(f, "blk.0.attn_k.weight"),
                       ks = ts[l + "self_attn.k_proj.weight"].values;
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < E; ++c) EXPECT_EQ(k[r * E + c], ks[rows[r] * E + c]) << r;
    // Plain norms: no +1; v unchanged; tied head: no output tensor.
    EXPECT_EQ(floats_of(f, "blk.0.ffn_norm.weight"),
              ts[l + "post_attention_layernorm.weight"].values);
    EXPECT_EQ(floats_of(f, "blk.0.attn_v.weight"), ts[l + "self_attn.v_proj.weight"].values);
    EXPECT_EQ(f.tensor("output.weight"), nullptr);
    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    EXPECT_EQ(f.get_int("llama.rope.dimension_count"), 4);
    EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id"), 97);
    EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token"));
}

TEST(ConvertTypes, Q8AndF16KeepVectorsInF32) {
    Qwen35Folder folder;
    folder.write();
    for (const char* type : {"f16", "q8_0"}) {
        dl::convert::ConvertOptions o;
        o.type = type;
        std::vector<uint8_t> bytes = dl::convert::convert_hf_to_bytes(folder.dir, o);
        dl::gguf::File f = dl::gguf::File::parse(bytes.data(), bytes.size());
        EXPECT_EQ(f.tensor("blk.0.ssm_a")->type, dl::QType::F32);
        EXPECT_EQ(f.tensor("blk.0.ssm_conv1d.weight")->type, dl::QType::F32);
        EXPECT_EQ(f.tensor("blk.0.attn_norm.weight")->type, dl::QType::F32);
        // Rows of 8 cannot hold Q8_0 blocks of 32: those matrices fall back to a float type.
        dl::QType m = f.tensor("blk.0.ffn_up.weight")->type;
        EXPECT_TRUE(m == dl::QType::F16 || m == dl::QType::F32 || m == dl::QType::BF16) << type;
    }
}

// Errors are one dl::Error sentence naming the problem.
template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const dl::Error& e) {
        return e.what();
    }
    return "";
}

TEST(ConvertErrors, OneSentenceEach) {
    const std::string root = testhf::tmp_root();
    EXPECT_NE(error_of([&] {
                  dl::convert::convert_hf_to_bytes(root + "/no_such_model_dir");
              }).find("not a folder"),
              std::string::npos);

    Qwen35Folder folder;
    folder.dir = root + "/convert_errors";
    nlohmann::json cfg = folder.config();
    cfg["architectures"] = {"GPT2LMHeadModel"};
    cfg["model_type"] = "gpt2";
    testhf::write_folder(folder.dir, cfg, folder.ts);
    EXPECT_NE(error_of([&] {
                  dl::convert::convert_hf_to_bytes(folder.dir);
              }).find("unsupported architecture 'GPT2LMHeadModel'"),
              std::string::npos);

    auto ts = folder.ts;
    ts.erase("model.language_model.layers.0.linear_attn.A_log");
    testhf::write_folder(folder.dir, folder.config(), ts);
    std::string e = error_of([&] { dl::convert::convert_hf_to_bytes(folder.dir); });
    EXPECT_NE(e.find("A_log"), std::string::npos) << e;
    EXPECT_NE(e.find("missing"), std::string::npos) << e;

    ts = folder.ts;
    ts["model.language_model.norm.weight"].dtype = "BOOL";
    testhf::write_folder(folder.dir, folder.config(), ts);
    e = error_of([&] { dl::convert::convert_hf_to_bytes(folder.dir); });
    EXPECT_NE(e.find("BOOL"), std::string::npos) << e;

    folder.write();
    dl::convert::ConvertOptions o;
    o.type = "q3_banana";
    e = error_of([&] { dl::convert::convert_hf_to_bytes(folder.dir, o); });
    EXPECT_NE(e.find("unknown output type 'q3_banana'"), std::string::npos) << e;

    std::filesystem::remove(folder.dir + "/tokenizer.json");
    e = error_of([&] { dl::convert::convert_hf_to_bytes(folder.dir); });
    EXPECT_NE(e.find("tokenizer.json not found"), std::string::npos) << e;
}

TEST(ConvertCli, ErrorIsOneLineAndExitCodeOne) {
    const std::string bin = testhf::deltallm_bin();
    ASSERT_TRUE(std::filesystem::exists(bin)) << bin << " does not exist (set DELTALLM_BIN)";
    std::string cmd =
        std::string(bin) + " convert /no/such/folder -o " + testhf::tmp_root() + "/never.gguf 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[512];
    while (fgets(buf, sizeof buf, p)) out += buf;
    int rc = pclose(p);
    EXPECT_EQ(WEXITSTATUS(rc), 1);
    EXPECT_EQ(out.rfind("error: ", 0), 0u) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

}  // namespace

namespace {

struct CliRun {
    int rc = -1;  // 128 + the signal when the child was killed
    std::string out;
};

CliRun convert_cli(const std::string& dir, const std::string& out_path) {
    std::string cmd = testhf::deltallm_bin() + " convert " + dir + " -o " + out_path + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    CliRun r;
    if (!p) return r;
    char buf[512];
    while (fgets(buf, sizeof buf, p)) r.out += buf;
    int status = pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
}

void expect_one_error_line(const CliRun& r, const std::string& part) {
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_NE(r.out.find(part), std::string::npos) << r.out;
}

}  // namespace

// Each of these crashed the converter (stack overflow, division by zero, std::length_error, an
// uncaught stream exception) before it was validated.
TEST(ConvertCli, HostileConfigsAreOneErrorLine) {
    Qwen35Folder folder;
    folder.dir = testhf::tmp_root() + "/hostile";
    const std::string out = testhf::tmp_root() + "/hostile.gguf";

    nlohmann::json cfg = folder.config();
    testhf::write_folder(folder.dir, cfg, folder.ts);
    std::string deep(70000, '[');
    deep += std::string(70000, ']');
    {
        std::string text = cfg.dump();
        text.insert(1, "\"deep\":" + deep + ",");
        std::ofstream(folder.dir + "/config.json", std::ios::trunc) << text;
    }
    expect_one_error_line(convert_cli(folder.dir, out), "deeper than");

    const std::vector<std::pair<std::string, nlohmann::json>> bad = {
        {"num_attention_heads", 0},       {"hidden_size", -8},       {"head_dim", -4},
        {"vocab_size", int64_t{1} << 40}, {"num_hidden_layers", -1},
    };
    for (const auto& [key, value] : bad) {
        nlohmann::json c = folder.config();
        // Qwen3.5 keeps the text model's values under text_config.
        (c.contains("text_config") ? c["text_config"] : c)[key] = value;
        testhf::write_folder(folder.dir, c, folder.ts);
        SCOPED_TRACE(key);
        expect_one_error_line(convert_cli(folder.dir, out), key);
    }

    testhf::write_folder(folder.dir, folder.config(), folder.ts);
    std::filesystem::remove(folder.dir + "/tokenizer.json");
    std::filesystem::create_directory(folder.dir + "/tokenizer.json");
    expect_one_error_line(convert_cli(folder.dir, out), "a folder");
    EXPECT_FALSE(std::filesystem::exists(out));
}

// The first missing tensor of a model with many layers is found in time linear in the layers
// (two checks were quadratic: 10,000 layers took 22 s, 100,000 about 40 minutes).
TEST(ConvertErrors, ManyLayersFailFast) {
    Qwen35Folder folder;
    folder.dir = testhf::tmp_root() + "/many_layers";
    nlohmann::json c = folder.config();
    (c.contains("text_config") ? c["text_config"] : c)["num_hidden_layers"] = 30000;
    (c.contains("text_config") ? c["text_config"] : c).erase("layer_types");
    testhf::write_folder(folder.dir, c, folder.ts);
    auto t0 = std::chrono::steady_clock::now();
    std::string e = error_of([&] { dl::convert::convert_hf_to_bytes(folder.dir); });
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(e.find("missing"), std::string::npos) << e;
    EXPECT_LT(s, 20.0);
}
