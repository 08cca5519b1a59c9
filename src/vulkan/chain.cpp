// The layer chain shared by the token and window commands (see chain.h).
#include "vulkan/chain.h"

namespace dl::vk {

void record_layers(const Model& model, const ActLayout& A, const LayerChain& c) {
    const Hparams& hp = model.hp;
    for (int64_t il = 0; il < hp.n_layer; ++il) {
        const Layer& L = model.layers[il];
        const Tensor* next_norm =
            il + 1 < hp.n_layer ? model.layers[il + 1].attn_norm : model.output_norm;
        c.inputs(A.xn, hp.n_embd);
        if (hp.is_recurrent(il)) {
            c.project(L.ssm_qkv, A.xn, A.qkv);
            c.project(L.ssm_z, A.xn, A.z);
            c.project(L.ssm_beta, A.xn, A.beta);
            c.project(L.ssm_alpha, A.xn, A.alpha);
            c.stage(c.project_role);
            c.deltanet(il, L);
            c.stage("deltanet");
            c.add_norm(L.ssm_out, A.y, hp.ssm_d_inner, L.ffn_norm);
        } else {
            c.project(L.wq, A.xn, A.q);
            c.project(L.wk, A.xn, A.k);
            c.project(L.wv, A.xn, A.v);
            c.stage(c.project_role);
            c.attention(il, L);
            c.stage("attention");
            c.add_norm(L.wo, A.o, hp.n_head * hp.head_dim, L.ffn_norm);
        }
        c.inputs(A.xn, hp.n_embd);
        c.ffn_in(L, next_norm);
        c.add_norm(L.ffn_down, A.ffn, hp.n_ff, next_norm);
    }
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
    c.add_norm = [&](const Tensor* t, uint32_t, int64_t, const Tensor*) {
        groups.back().push_back(t);
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
    c.add_norm = [&](const Tensor*, uint32_t, int64_t, const Tensor* norm_w) { cur = norm_w; };
    record_layers(model, A, c);
    readers[cur].push_back(model.output);
    return readers;
}

}  // namespace dl::vk
