// Builds the step list of a model's forward pass from its features (see forward_pass.h).
#include "model/forward_pass.h"

#include <fmt/format.h>

#include "core/error.h"

namespace dl {

namespace {

struct Builder {
    std::vector<Step> steps;
    int64_t layer = -1;

    void add(Op op, const Tensor* w = nullptr, Act in = Act::h, Act out = Act::h,
             const Tensor* w2 = nullptr) {
        steps.push_back(Step{op, layer, w, w2, in, out});
    }
    void project(const Tensor* w, Act in, Act out) { add(Op::project, w, in, out); }

    // Queries, keys and values from xn; per-head norms where the model has them; the rotary;
    // the KV cache and the attention; the output gate where the model has one.
    void attention(const Hparams& hp, const Layer& L) {
        project(L.wq, Act::xn, Act::q);
        project(L.wk, Act::xn, Act::k);
        project(L.wv, Act::xn, Act::v);
        if (hp.qk_norm) add(Op::qk_norm, L.q_norm, Act::q, Act::q, L.k_norm);
        add(Op::rope, nullptr, Act::q, Act::q);
        add(Op::attention, nullptr, Act::q, Act::o);
        if (hp.attn_output_gate) add(Op::output_gate, nullptr, Act::q, Act::o);
        project(L.wo, Act::o, Act::out);
    }

    // The Gated DeltaNet mixer (shared/design/QWEN35.md).
    void deltanet(const Layer& L) {
        project(L.ssm_qkv, Act::xn, Act::qkv);
        project(L.ssm_z, Act::xn, Act::z);
        project(L.ssm_beta, Act::xn, Act::beta);
        project(L.ssm_alpha, Act::xn, Act::alpha);
        add(Op::deltanet_gates, nullptr, Act::alpha, Act::alpha);
        add(Op::deltanet_conv, nullptr, Act::qkv, Act::qkv);
        add(Op::deltanet_qk_norm, nullptr, Act::qkv, Act::qkv);
        add(Op::deltanet_scan, nullptr, Act::qkv, Act::y);
        add(Op::deltanet_out_norm, L.ssm_norm, Act::y, Act::y);
        project(L.ssm_out, Act::y, Act::out);
    }

    void ffn(const Hparams& hp, const Layer& L) {
        switch (hp.ffn_kind) {
            case FfnKind::swiglu:
                project(L.ffn_gate, Act::xn, Act::gate);
                project(L.ffn_up, Act::xn, Act::up);
                add(Op::swiglu, nullptr, Act::gate, Act::ffn);
                project(L.ffn_down, Act::ffn, Act::out);
                return;
            case FfnKind::experts:
                project(L.ffn_gate_inp, Act::xn, Act::router);
                steps.push_back(Step{Op::moe_experts, layer,
                                     L.ffn_gate_up_exps ? L.ffn_gate_up_exps : L.ffn_gate_exps,
                                     L.ffn_up_exps, Act::xn, Act::out, L.ffn_down_exps});
                if (L.ffn_gate_shexp) {
                    project(L.ffn_gate_shexp, Act::xn, Act::gate);
                    project(L.ffn_up_shexp, Act::xn, Act::up);
                    add(Op::swiglu, nullptr, Act::gate, Act::ffn);
                    project(L.ffn_down_shexp, Act::ffn, Act::shared);
                    add(Op::shared_expert_gate, L.ffn_gate_inp_shexp, Act::shared, Act::out);
                }
                return;
        }
        fail("the feed-forward network of layer {} has no forward pass", layer);
    }
};

}  // namespace

ForwardPass ForwardPass::build(const Model& model) {
    const Hparams& hp = model.hp;
    if ((int64_t)hp.layer_kinds.size() != hp.n_layer || (int64_t)model.layers.size() != hp.n_layer)
        fail("the model describes {} layer kinds and {} layers for {} trunk layers",
             hp.layer_kinds.size(), model.layers.size(), hp.n_layer);
    Builder b;
    b.add(Op::embed, model.tok_embd, Act::h, Act::h);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        const Layer& L = model.layers[il];
        b.layer = il;
        b.add(Op::rms_norm, L.attn_norm, Act::h, Act::xn);
        switch (hp.layer_kind(il)) {
            case LayerKind::attention:
                b.attention(hp, L);
                break;
            case LayerKind::deltanet:
                b.deltanet(L);
                break;
        }
        b.add(Op::residual, nullptr, Act::out, Act::h);
        b.add(Op::rms_norm, L.ffn_norm, Act::h, Act::xn);
        b.ffn(hp, L);
        b.add(Op::residual, nullptr, Act::out, Act::h);
    }
    b.layer = -1;
    b.add(Op::rms_norm, model.output_norm, Act::h, Act::xn);
    b.add(Op::head, model.output, Act::xn, Act::logits);
    return ForwardPass{std::move(b.steps)};
}

const char* op_name(Op op) {
    switch (op) {
        case Op::embed:
            return "embed";
        case Op::rms_norm:
            return "rms_norm";
        case Op::project:
            return "project";
        case Op::residual:
            return "residual";
        case Op::qk_norm:
            return "qk_norm";
        case Op::rope:
            return "rope";
        case Op::attention:
            return "attention";
        case Op::output_gate:
            return "output_gate";
        case Op::deltanet_gates:
            return "deltanet_gates";
        case Op::deltanet_conv:
            return "deltanet_conv";
        case Op::deltanet_qk_norm:
            return "deltanet_qk_norm";
        case Op::deltanet_scan:
            return "deltanet_scan";
        case Op::deltanet_out_norm:
            return "deltanet_out_norm";
        case Op::swiglu:
            return "swiglu";
        case Op::head:
            return "head";
        case Op::moe_experts:
            return "moe_experts";
        case Op::shared_expert_gate:
            return "shared_expert_gate";
    }
    return "?";
}

const char* act_name(Act a) {
    static const char* names[] = {"h",   "xn",  "q",    "k",      "v",      "o",
                                  "qkv", "z",   "beta", "alpha",  "y",      "gate",
                                  "up",  "ffn", "out",  "logits", "router", "shared"};
    return names[static_cast<size_t>(a)];
}

std::string ForwardPass::describe() const {
    std::string out;
    for (const Step& s : steps) {
        out += s.layer >= 0 ? fmt::format("blk.{} ", s.layer) : std::string();
        out += op_name(s.op);
        if (s.w) out += " " + s.w->name;
        if (s.w2) out += " " + s.w2->name;
        if (s.w3) out += " " + s.w3->name;
        out += fmt::format(" {} -> {}\n", act_name(s.in), act_name(s.out));
    }
    return out;
}

}  // namespace dl
