// The forward pass as data: the step list each kind of model gets from its features, written out
// here by hand from the math (shared/design/QWEN35.md; llama's and Qwen3's blocks), so a change
// of the layer order or a lost feature shows as a changed list.
#include <gtest/gtest.h>

#include "model/forward_pass.h"
#include "model/tiny_model.h"

namespace dl {
namespace {

using test::TinySpec;

// The steps of one layer as "op in->out" words, weights left out.
std::vector<std::string> layer_ops(const ForwardPass& p, int64_t layer) {
    std::vector<std::string> out;
    for (const Step& s : p.steps)
        if (s.layer == layer)
            out.push_back(std::string(op_name(s.op)) + " " + act_name(s.in) + "->" +
                          act_name(s.out));
    return out;
}

const std::vector<std::string> kFfn = {"residual out->h", "rms_norm h->xn",   "project xn->gate",
                                       "project xn->up",  "swiglu gate->ffn", "project ffn->out",
                                       "residual out->h"};

std::vector<std::string> with_ffn(std::vector<std::string> mixer) {
    mixer.insert(mixer.begin(), "rms_norm h->xn");
    mixer.insert(mixer.end(), kFfn.begin(), kFfn.end());
    return mixer;
}

TEST(ForwardPass, Qwen35DeltaNetAndGatedAttentionLayers) {
    TinySpec s;  // qwen35, four layers, the fourth attention
    auto m = test::tiny_model(s);
    const ForwardPass p = ForwardPass::build(*m);
    EXPECT_EQ(layer_ops(p, 0),
              with_ffn({"project xn->qkv", "project xn->z", "project xn->beta", "project xn->alpha",
                        "deltanet_gates alpha->alpha", "deltanet_conv qkv->qkv",
                        "deltanet_qk_norm qkv->qkv", "deltanet_scan qkv->y",
                        "deltanet_out_norm y->y", "project y->out"}));
    EXPECT_EQ(layer_ops(p, 3),
              with_ffn({"project xn->q", "project xn->k", "project xn->v", "qk_norm q->q",
                        "rope q->q", "attention q->o", "output_gate q->o", "project o->out"}));
    // Before and after the trunk.
    ASSERT_GE(p.steps.size(), 3u);
    EXPECT_EQ(p.steps.front().op, Op::embed);
    EXPECT_EQ(p.steps.front().w, m->tok_embd);
    EXPECT_EQ(p.steps[p.steps.size() - 2].op, Op::rms_norm);
    EXPECT_EQ(p.steps[p.steps.size() - 2].w, m->output_norm);
    EXPECT_EQ(p.steps.back().op, Op::head);
    EXPECT_EQ(p.steps.back().w, m->output);
}

TEST(ForwardPass, StepsCarryTheLayersOwnWeights) {
    TinySpec s;
    auto m = test::tiny_model(s);
    const ForwardPass p = ForwardPass::build(*m);
    const Layer& L0 = m->layers[0];
    const Layer& L3 = m->layers[3];
    bool saw_out_norm = false, saw_qk_norm = false;
    for (const Step& st : p.steps) {
        if (st.op == Op::deltanet_out_norm && st.layer == 0) {
            EXPECT_EQ(st.w, L0.ssm_norm);
            saw_out_norm = true;
        }
        if (st.op == Op::qk_norm) {
            EXPECT_EQ(st.layer, 3);
            EXPECT_EQ(st.w, L3.q_norm);
            EXPECT_EQ(st.w2, L3.k_norm);
            saw_qk_norm = true;
        }
        if (st.op == Op::project && st.layer == 3 && st.out == Act::gate) {
            EXPECT_EQ(st.w, L3.ffn_gate);
        }
    }
    EXPECT_TRUE(saw_out_norm);
    EXPECT_TRUE(saw_qk_norm);
}

TEST(ForwardPass, Qwen3HasQkNormAndNoGate) {
    TinySpec s;
    s.arch = "qwen3";
    s.n_layer = 2;
    s.rope_dims = s.head_dim;
    auto m = test::tiny_model(s);
    const ForwardPass p = ForwardPass::build(*m);
    EXPECT_EQ(layer_ops(p, 1),
              with_ffn({"project xn->q", "project xn->k", "project xn->v", "qk_norm q->q",
                        "rope q->q", "attention q->o", "project o->out"}));
}

TEST(ForwardPass, LlamaHasNeitherQkNormNorGate) {
    TinySpec s;
    s.arch = "llama";
    s.n_layer = 2;
    s.rope_dims = s.head_dim;
    auto m = test::tiny_model(s);
    const ForwardPass p = ForwardPass::build(*m);
    EXPECT_EQ(layer_ops(p, 0), with_ffn({"project xn->q", "project xn->k", "project xn->v",
                                         "rope q->q", "attention q->o", "project o->out"}));
    // embed, 2 layers of 6 + 7 steps plus the attn norm, output norm, head
    EXPECT_EQ(p.steps.size(), 1u + 2u * (1 + 6 + 7) + 2u);
}

TEST(ForwardPass, DescribeNamesEveryStep) {
    TinySpec s;
    s.arch = "llama";
    s.n_layer = 1;
    s.rope_dims = s.head_dim;
    auto m = test::tiny_model(s);
    const ForwardPass p = ForwardPass::build(*m);
    const std::string d = p.describe();
    EXPECT_EQ((size_t)std::count(d.begin(), d.end(), '\n'), p.steps.size());
    EXPECT_NE(d.find("blk.0 project blk.0.attn_q.weight xn -> q"), std::string::npos) << d;
    EXPECT_NE(d.find("head output.weight xn -> logits"), std::string::npos) << d;
}

}  // namespace
}  // namespace dl
