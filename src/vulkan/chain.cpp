// The layer chain shared by the token and window commands (see chain.h).
#include "vulkan/chain.h"

#include "core/error.h"
#include "model/forward_pass.h"

namespace dl::vk {

namespace {

bool is_mixer_step(Op op) {
    switch (op) {
        case Op::qk_norm:
        case Op::rope:
        case Op::attention:
        case Op::output_gate:
        case Op::deltanet_gates:
        case Op::deltanet_conv:
        case Op::deltanet_qk_norm:
        case Op::deltanet_scan:
        case Op::deltanet_out_norm:
            return true;
        default:
            return false;
    }
}

}  // namespace

// The steps of the forward pass between the first norm and the head, in the runs the commands
// record together: a mixer's input projections (one stage), the mixer's steps (one kernel: the
// attention or the DeltaNet step/scan), a projection with the residual and the norm after it
// (add_norm), the FFN's gate and up with the SwiGLU (ffn_in).
void record_layers(const Model& model, const ActLayout& A, const LayerChain& c) {
    const ForwardPass pass = ForwardPass::build(model);
    const std::vector<Step>& st = pass.steps;
    const Hparams& hp = model.hp;
    auto unexpected = [&](size_t i) {
        fail("the Vulkan driver has no kernels for the step '{}' of layer {} here",
             op_name(st[i].op), st[i].layer);
    };
    size_t i = 0;
    while (i < st.size() && st[i].op != Op::rms_norm) ++i;  // the embedding and the first norm
    ++i;
    while (i < st.size() && st[i].op != Op::head) {
        const Step& s = st[i];
        if (s.op != Op::project) unexpected(i);
        const Layer& L = model.layers[s.layer];
        if (s.in == Act::xn && s.out == Act::router) {  // a mixture of experts
            size_t n = i + 1;
            if (n >= st.size() || st[n].op != Op::moe_experts || !c.experts) unexpected(i);
            while (n < st.size() && st[n].op != Op::rms_norm) ++n;
            if (n == st.size() || st[n - 1].op != Op::residual) unexpected(i);
            c.inputs(A.xn, hp.n_embd);
            c.experts(L, st[n].w);
            i = n + 1;
        } else if (s.in == Act::xn && s.out == Act::gate) {  // the FFN
            if (i + 2 >= st.size() || st[i + 1].out != Act::up || st[i + 2].op != Op::swiglu)
                unexpected(i);
            size_t n = i + 3;
            while (n < st.size() && st[n].op != Op::rms_norm) ++n;
            if (n == st.size()) unexpected(i);
            c.inputs(A.xn, hp.n_embd);
            c.ffn_in(L, st[n].w);
            i += 3;
        } else if (s.in == Act::xn) {  // a mixer's input projections, then its steps
            c.inputs(A.xn, hp.n_embd);
            for (; i < st.size() && st[i].op == Op::project && st[i].in == Act::xn; ++i)
                c.project(st[i].w, A.xn, A.at(st[i].out));
            c.stage(c.project_role);
            bool deltanet = false, attention = false;
            for (; i < st.size() && is_mixer_step(st[i].op); ++i) {
                deltanet |= st[i].op == Op::deltanet_scan;
                attention |= st[i].op == Op::attention;
            }
            if (deltanet == attention) unexpected(i - 1);
            if (deltanet) {
                c.deltanet(s.layer, L);
                c.stage("deltanet");
            } else {
                c.attention(s.layer, L);
                c.stage("attention");
            }
        } else {  // an output or down projection: h += W · in, then the next norm
            if (i + 2 >= st.size() || st[i + 1].op != Op::residual || st[i + 2].op != Op::rms_norm)
                unexpected(i);
            c.add_norm(s.w, s.in, A.at(s.in), s.w->cols(), st[i + 2].w);
            i += 3;
        }
    }
}

std::string unsupported_steps(const Model& model) {
    try {
        gemm_groups(model, false);
    } catch (const Error& e) {
        return e.what();
    }
    return {};
}

std::vector<std::vector<const Tensor*>> gemm_groups(const Model& model, bool head) {
    std::vector<std::vector<const Tensor*>> groups(1);
    auto close = [&] {
        if (!groups.back().empty()) groups.emplace_back();
    };
    LayerChain c;
    c.stage = [&](const char*) { close(); };
    c.project_role = "";
    c.project = [&](const Tensor* t, uint32_t, uint32_t) { groups.back().push_back(t); };
    c.inputs = [](uint32_t, int64_t) {};
    c.deltanet = c.attention = [](int64_t, const Layer&) {};
    c.ffn_in = [&](const Layer& L, const Tensor*) {
        groups.back().push_back(L.ffn_gate);
        groups.back().push_back(L.ffn_up);
        close();
    };
    c.add_norm = [&](const Tensor* t, Act, uint32_t, int64_t, const Tensor*) {
        groups.back().push_back(t);
        close();
    };
    c.experts = [&](const Layer& L, const Tensor*) {
        groups.back().push_back(L.ffn_gate_inp);
        if (L.ffn_gate_shexp) {
            groups.back().push_back(L.ffn_gate_shexp);
            groups.back().push_back(L.ffn_up_shexp);
            close();
            groups.back().push_back(L.ffn_down_shexp);
        }
        close();
    };
    record_layers(model, act_layout(model.hp, 1), c);
    if (head) groups.back().push_back(model.output);
    if (groups.back().empty()) groups.pop_back();
    return groups;
}

std::map<const Tensor*, std::vector<const Tensor*>> norm_readers(const Model& model) {
    std::map<const Tensor*, std::vector<const Tensor*>> readers;
    const ActLayout A = act_layout(model.hp, 1);
    const Tensor* cur = model.layers[0].attn_norm;
    LayerChain c;
    c.stage = [](const char*) {};
    c.project_role = "";
    c.inputs = [](uint32_t, int64_t) {};
    c.deltanet = c.attention = [](int64_t, const Layer&) {};
    c.project = [&](const Tensor* t, uint32_t x_off, uint32_t) {
        if (x_off == A.xn) readers[cur].push_back(t);
    };
    c.ffn_in = [&](const Layer& L, const Tensor*) {
        readers[cur].push_back(L.ffn_gate);
        readers[cur].push_back(L.ffn_up);
    };
    c.add_norm = [&](const Tensor*, Act, uint32_t, int64_t, const Tensor* norm_w) { cur = norm_w; };
    c.experts = [&](const Layer& L, const Tensor* next_norm) {
        for (const Tensor* t : {L.ffn_gate_inp, L.ffn_gate_shexp, L.ffn_up_shexp})
            if (t) readers[cur].push_back(t);
        cur = next_norm;
    };
    record_layers(model, A, c);
    readers[cur].push_back(model.output);
    return readers;
}

}  // namespace dl::vk
