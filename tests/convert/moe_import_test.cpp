// Mixture-of-experts import: experts stacked in expert order from checkpoints that store one
// module per expert (Qwen3MoE) or every expert in one 3-D tensor per projection (Qwen3.5-MoE),
// and the mixtures the forward pass would compute wrongly refused with a sentence.
#include <gtest/gtest.h>

#include <cstring>

#include "convert/convert.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "hf_folder.h"
#include "model/model.h"

namespace {

using testhf::floats_of;
using testhf::ramp;
using testhf::StTensor;

}  // namespace

namespace {

// A one-layer Qwen3MoE checkpoint with three experts of width 4 (values distinct per tensor).
std::map<std::string, StTensor> qwen3moe_tensors(int64_t E, int64_t X, int64_t F, int64_t V) {
    std::map<std::string, StTensor> ts;
    float base = 0.f;
    auto put = [&](const std::string& n, std::vector<int64_t> shape) {
        size_t c = 1;
        for (int64_t d : shape) c *= (size_t)d;
        ts[n] = StTensor{"F32", shape, ramp(c, base += 0.25f)};
    };
    put("model.embed_tokens.weight", {V, E});
    put("model.norm.weight", {E});
    const std::string l = "model.layers.0.";
    put(l + "input_layernorm.weight", {E});
    put(l + "post_attention_layernorm.weight", {E});
    put(l + "self_attn.q_proj.weight", {2 * 4, E});
    put(l + "self_attn.k_proj.weight", {4, E});
    put(l + "self_attn.v_proj.weight", {4, E});
    put(l + "self_attn.o_proj.weight", {E, 2 * 4});
    put(l + "self_attn.q_norm.weight", {4});
    put(l + "self_attn.k_norm.weight", {4});
    put(l + "mlp.gate.weight", {X, E});
    for (int64_t e = 0; e < X; ++e) {
        const std::string x = l + "mlp.experts." + std::to_string(e) + ".";
        put(x + "gate_proj.weight", {F, E});
        put(x + "up_proj.weight", {F, E});
        put(x + "down_proj.weight", {E, F});
    }
    return ts;
}

nlohmann::json qwen3moe_config(int64_t E, int64_t X, int64_t F, int64_t V) {
    return {{"architectures", {"Qwen3MoeForCausalLM"}},
            {"model_type", "qwen3_moe"},
            {"hidden_size", E},
            {"num_hidden_layers", 1},
            {"intermediate_size", 64},
            {"moe_intermediate_size", F},
            {"num_experts", X},
            {"num_experts_per_tok", 2},
            {"norm_topk_prob", true},
            {"num_attention_heads", 2},
            {"num_key_value_heads", 1},
            {"head_dim", 4},
            {"vocab_size", V},
            {"rope_theta", 1000000.0},
            {"tie_word_embeddings", true}};
}

}  // namespace

// Experts are stacked in expert order, each its own [rows, cols] matrix as stored, the router
// kept as written; the keys llama.cpp writes are there and the file loads as a mixture.
TEST(MoeImport, Qwen3MoeExpertsStackedInExpertOrder) {
    const int64_t E = 8, X = 3, F = 4, V = 100;
    auto ts = qwen3moe_tensors(E, X, F, V);
    const std::string dir = testhf::tmp_root() + "/convert_qwen3moe";
    testhf::write_folder(dir, qwen3moe_config(E, X, F, V), ts, {{"eos_token", "<|im_end|>"}});
    dl::convert::ConvertOptions o;
    o.type = "f32";
    std::vector<uint8_t> bytes = dl::convert::convert_hf_to_bytes(dir, o);
    dl::gguf::File f = dl::gguf::File::parse(bytes.data(), bytes.size());
    EXPECT_EQ(f.get_string("general.architecture"), "qwen3moe");
    EXPECT_EQ(f.get_int("qwen3moe.expert_count"), X);
    EXPECT_EQ(f.get_int("qwen3moe.expert_used_count"), 2);
    EXPECT_EQ(f.get_int("qwen3moe.expert_feed_forward_length"), F);
    const std::string l = "model.layers.0.";
    EXPECT_EQ(floats_of(f, "blk.0.ffn_gate_inp.weight"), ts[l + "mlp.gate.weight"].values);
    for (const auto& [gguf, proj] :
         {std::pair{"ffn_gate_exps", "gate_proj"}, std::pair{"ffn_up_exps", "up_proj"},
          std::pair{"ffn_down_exps", "down_proj"}}) {
        std::vector<float> want;
        for (int64_t e = 0; e < X; ++e) {
            const auto& v =
                ts[l + "mlp.experts." + std::to_string(e) + "." + proj + ".weight"].values;
            want.insert(want.end(), v.begin(), v.end());
        }
        EXPECT_EQ(floats_of(f, std::string("blk.0.") + gguf + ".weight"), want) << gguf;
    }
    const auto* down = f.tensor("blk.0.ffn_down_exps.weight");
    ASSERT_TRUE(down);
    EXPECT_EQ(down->ne, (std::vector<int64_t>{F, E, X}));
    EXPECT_EQ(f.tensor("blk.0.ffn_gate.weight"), nullptr);
    auto model = dl::Model::from_file(std::make_shared<dl::gguf::File>(std::move(f)));
    EXPECT_EQ(model->hp.ffn_kind, dl::FfnKind::experts);
    EXPECT_EQ(model->hp.n_expert, X);
}

// Checkpoints whose mixture the forward pass would compute wrongly are refused.
TEST(MoeImport, MixturesItCannotRunAreOneSentence) {
    const int64_t E = 8, X = 3, F = 4, V = 100;
    auto ts = qwen3moe_tensors(E, X, F, V);
    const std::string dir = testhf::tmp_root() + "/convert_qwen3moe_bad";
    dl::convert::ConvertOptions o;
    o.type = "f32";
    auto expect_error = [&](nlohmann::json cfg, const std::string& part) {
        testhf::write_folder(dir, cfg, ts, {{"eos_token", "<|im_end|>"}});
        try {
            dl::convert::convert_hf_to_bytes(dir, o);
            ADD_FAILURE() << "converted: " << part;
        } catch (const dl::Error& e) {
            EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
        }
    };
    auto cfg = qwen3moe_config(E, X, F, V);
    cfg["norm_topk_prob"] = false;
    expect_error(cfg, "norm_topk_prob");
    cfg = qwen3moe_config(E, X, F, V);
    cfg["mlp_only_layers"] = {0};
    expect_error(cfg, "mlp_only_layers");
    cfg = qwen3moe_config(E, X, F, V);
    cfg["num_experts_per_tok"] = 4;
    expect_error(cfg, "experts");
    cfg = qwen3moe_config(E, X, F, V);
    cfg["moe_intermediate_size"] = 5;
    expect_error(cfg, "shape");
}

// Every expert in one tensor per projection, as Qwen3.5-MoE checkpoints store them:
// mlp.experts.gate_up_proj [n_expert, 2 F, E] (each expert's gate rows, then its up rows) and
// mlp.experts.down_proj [n_expert, E, F]; the same stacks as from one module per expert.
TEST(MoeImport, ExpertsInOneTensorSplitIntoGateAndUp) {
    const int64_t E = 8, X = 3, F = 4, V = 100;
    auto ts = qwen3moe_tensors(E, X, F, V);
    const std::string l = "model.layers.0.";
    std::vector<float> gate_up, down;
    for (int64_t e = 0; e < X; ++e) {
        const std::string x = l + "mlp.experts." + std::to_string(e) + ".";
        for (const char* proj : {"gate_proj", "up_proj"}) {
            const auto& v = ts[x + proj + ".weight"].values;
            gate_up.insert(gate_up.end(), v.begin(), v.end());
        }
        const auto& d = ts[x + "down_proj.weight"].values;
        down.insert(down.end(), d.begin(), d.end());
    }
    auto fused = ts;
    for (int64_t e = 0; e < X; ++e)
        for (const char* proj : {"gate_proj", "up_proj", "down_proj"})
            fused.erase(l + "mlp.experts." + std::to_string(e) + "." + proj + ".weight");
    fused[l + "mlp.experts.gate_up_proj"] = StTensor{"F32", {X, 2 * F, E}, gate_up};
    fused[l + "mlp.experts.down_proj"] = StTensor{"F32", {X, E, F}, down};
    dl::convert::ConvertOptions o;
    o.type = "f32";
    const std::string a = testhf::tmp_root() + "/convert_moe_apart";
    const std::string b = testhf::tmp_root() + "/convert_moe_fused";
    testhf::write_folder(a, qwen3moe_config(E, X, F, V), ts, {{"eos_token", "<|im_end|>"}});
    testhf::write_folder(b, qwen3moe_config(E, X, F, V), fused, {{"eos_token", "<|im_end|>"}});
    std::vector<uint8_t> ba = dl::convert::convert_hf_to_bytes(a, o);
    std::vector<uint8_t> bb = dl::convert::convert_hf_to_bytes(b, o);
    dl::gguf::File fa = dl::gguf::File::parse(ba.data(), ba.size());
    dl::gguf::File fb = dl::gguf::File::parse(bb.data(), bb.size());
    for (const char* t : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) {
        const std::string name = std::string("blk.0.") + t + ".weight";
        EXPECT_EQ(floats_of(fb, name), floats_of(fa, name)) << t;
        EXPECT_EQ(fb.tensor(name)->ne, fa.tensor(name)->ne) << t;
    }
    // A fused tensor of another shape is one sentence naming it.
    fused[l + "mlp.experts.down_proj"] = StTensor{"F32", {X, E, F + 1}, ramp(X * E * (F + 1), 1)};
    testhf::write_folder(b, qwen3moe_config(E, X, F, V), fused, {{"eos_token", "<|im_end|>"}});
    try {
        dl::convert::convert_hf_to_bytes(b, o);
        ADD_FAILURE() << "converted a down_proj of the wrong shape";
    } catch (const dl::Error& e) {
        EXPECT_NE(std::string(e.what()).find("down_proj"), std::string::npos) << e.what();
    }
}
