// Qwen3.5 (dense, text) import: tensor names, the +1 folded into the zero-centred RMSNorms,
// ssm_a = -exp(A_log), conv taps [C,1,K] -> ne {K, C}, and the value-head reordering that makes
// value head h pair with key head h mod H_k (docs: shared/design/QWEN35.md).
#include <cmath>
#include <functional>

#include "convert/hf.h"
#include "core/error.h"

namespace dl::convert {

// New value head n holds old head order[n]. The reference model stores the H_v / H_k value heads
// of each key head together (old head g*r + j belongs to key head g); the file interleaves them
// (new head j*H_k + g) so that a kernel pairs value head h with key head h mod H_k.
std::vector<int64_t> value_head_order(int64_t n_k_heads, int64_t n_v_heads) {
    const int64_t r = n_v_heads / n_k_heads;
    std::vector<int64_t> order((size_t)n_v_heads);
    for (int64_t g = 0; g < n_k_heads; ++g)
        for (int64_t j = 0; j < r; ++j) order[(size_t)(j * n_k_heads + g)] = g * r + j;
    return order;
}

namespace {

// Rows [row0, row0 + order.size() * head) of a row-major [rows][cols] matrix, reordered by
// value head.
void reorder_rows(std::vector<float>& w, int64_t cols, int64_t row0, int64_t head,
                  const std::vector<int64_t>& order) {
    std::vector<float> old(w.begin() + row0 * cols,
                           w.begin() + (row0 + (int64_t)order.size() * head) * cols);
    for (size_t n = 0; n < order.size(); ++n)
        std::copy_n(old.begin() + order[n] * head * cols, head * cols,
                    w.begin() + (row0 + (int64_t)n * head) * cols);
}

void reorder_cols(std::vector<float>& w, int64_t rows, int64_t cols, int64_t head,
                  const std::vector<int64_t>& order) {
    std::vector<float> row((size_t)cols);
    for (int64_t r = 0; r < rows; ++r) {
        float* p = w.data() + r * cols;
        std::copy_n(p, cols, row.begin());
        for (size_t n = 0; n < order.size(); ++n)
            std::copy_n(row.begin() + order[n] * head, head, p + (int64_t)n * head);
    }
}

}  // namespace

void plan_qwen35(const std::shared_ptr<HfModel>& m, Plan& plan) {
    const HfModel::TrunkSizes sizes = m->trunk_sizes();
    const int64_t E = sizes.n_embd, n_layer = sizes.n_layer, ffn = sizes.n_ff;
    const int64_t n_head = sizes.n_head, n_kv = sizes.n_head_kv, D = sizes.head_dim;
    const int64_t H_k = m->get_size("linear_num_key_heads");
    const int64_t H_v = m->get_size("linear_num_value_heads");
    const int64_t d_k = m->get_size("linear_key_head_dim");
    const int64_t d_v = m->get_size("linear_value_head_dim");
    const int64_t K = m->get_size("linear_conv_kernel_dim", 4);
    const int64_t n_vocab = m->get_size("vocab_size");
    if (!m->moe && m->has("num_experts") && m->get_int("num_experts") > 0)
        fail("{}: config.json names experts but not a MoE architecture ({})", m->dir, m->hf_arch);
    if (d_k != d_v)
        fail(
            "{}: linear_key_head_dim {} differs from linear_value_head_dim {}, which a GGUF "
            "qwen35 file cannot describe",
            m->dir, d_k, d_v);
    if (H_k <= 0 || H_v % H_k != 0)
        fail("{}: {} linear value heads cannot share {} key heads evenly", m->dir, H_v, H_k);

    // Which layers are attention: layer_types when given, else every interval-th layer.
    std::vector<bool> recurrent((size_t)n_layer);
    int64_t interval = m->get_int("full_attention_interval", 0);
    if (const nlohmann::json* lt = m->find("layer_types"); lt && lt->is_array()) {
        if ((int64_t)lt->size() < n_layer)
            fail("{}/config.json: layer_types has {} entries for {} layers", m->dir, lt->size(),
                 n_layer);
        for (int64_t i = 0; i < n_layer; ++i) {
            std::string s = (*lt)[(size_t)i].is_string() ? (*lt)[(size_t)i].get<std::string>() : "";
            if (s != "linear_attention" && s != "full_attention")
                fail(
                    "{}/config.json: layer_types[{}] '{}' is neither linear_attention nor "
                    "full_attention",
                    m->dir, i, s);
            recurrent[(size_t)i] = s == "linear_attention";
        }
        if (interval <= 0)  // the interval the pattern implies: first attention layer + 1
            for (int64_t i = n_layer - 1; i >= 0; --i)
                if (!recurrent[(size_t)i]) interval = i + 1;
    } else {
        if (interval <= 0) interval = 4;
        for (int64_t i = 0; i < n_layer; ++i) recurrent[(size_t)i] = (i + 1) % interval != 0;
    }
    bool periodic = interval > 0;
    for (int64_t i = 0; i < n_layer && periodic; ++i)
        periodic = recurrent[(size_t)i] == ((i + 1) % interval != 0);

    const double partial = [&] {
        const nlohmann::json* p = m->rope_param("partial_rotary_factor");
        return p && p->is_number() ? p->get<double>() : 0.25;
    }();
    std::vector<int32_t> sections = {11, 11, 10, 0};
    if (const nlohmann::json* s = m->rope_param("mrope_section"); s && s->is_array()) {
        sections.assign(4, 0);
        for (size_t i = 0; i < s->size() && i < 4; ++i) sections[i] = (*s)[i].get<int32_t>();
    }

    const std::string a = plan.arch + ".";
    auto u32 = [](int64_t x) { return gguf::Value::u32((uint32_t)x); };
    plan_attention_keys(*m, plan, D);
    const MoeSizes moe = m->moe ? plan_expert_keys(*m, plan) : MoeSizes{};
    plan.set(a + "rope.dimension_count", u32((int64_t)(D * partial)));
    plan.set(a + "rope.dimension_sections", gguf::Value::array_of_i32(sections));
    plan.set(a + "ssm.conv_kernel", u32(K));
    plan.set(a + "ssm.state_size", u32(d_k));
    plan.set(a + "ssm.group_count", u32(H_k));
    plan.set(a + "ssm.time_step_rank", u32(H_v));
    plan.set(a + "ssm.inner_size", u32(H_v * d_v));
    if (periodic) {
        plan.set(a + "full_attention_interval", u32(interval));
    } else {
        // A pattern no interval describes: per-layer key/value head counts, 0 = recurrent.
        std::vector<int32_t> kv((size_t)n_layer);
        for (int64_t i = 0; i < n_layer; ++i)
            kv[(size_t)i] = recurrent[(size_t)i] ? 0 : (int32_t)n_kv;
        plan.set(a + "attention.head_count_kv", gguf::Value::array_of_i32(kv));
    }

    auto hm = m;  // captured by the producers
    auto add = [&](std::string name, std::vector<int64_t> ne, std::function<void(float*)> values) {
        plan.tensors.push_back({std::move(name), std::move(ne), std::move(values), {}});
    };
    // A tensor copied as is (shape outermost first; ne is its reverse).
    auto copy = [&](const std::string& gguf_name, const std::string& hf_name,
                    std::vector<int64_t> shape, float add_one = 0.f) {
        std::vector<int64_t> ne(shape.rbegin(), shape.rend());
        add(gguf_name, ne, [hm, hf_name, shape, add_one](float* dst) {
            std::vector<float> v = hm->read(hf_name, shape);
            for (size_t i = 0; i < v.size(); ++i) dst[i] = v[i] + add_one;
        });
    };

    const std::vector<int64_t> order = value_head_order(H_k, H_v);
    const bool permute = H_k != H_v;
    const int64_t key_dim = H_k * d_k, value_dim = H_v * d_v, conv_dim = 2 * key_dim + value_dim;

    copy("token_embd.weight", "embed_tokens.weight", {n_vocab, E});
    for (int64_t il = 0; il < n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        const std::string h = "layers." + std::to_string(il) + ".";
        copy(b + "attn_norm.weight", h + "input_layernorm.weight", {E}, 1.f);
        if (recurrent[(size_t)il]) {
            const std::string la = h + "linear_attn.";
            add(b + "attn_qkv.weight", {E, conv_dim}, [=](float* dst) {
                std::vector<float> w = hm->read(la + "in_proj_qkv.weight", {conv_dim, E});
                if (permute) reorder_rows(w, E, 2 * key_dim, d_v, order);
                std::copy(w.begin(), w.end(), dst);
            });
            add(b + "attn_gate.weight", {E, value_dim}, [=](float* dst) {
                std::vector<float> w = hm->read(la + "in_proj_z.weight", {value_dim, E});
                if (permute) reorder_rows(w, E, 0, d_v, order);
                std::copy(w.begin(), w.end(), dst);
            });
            for (auto [gname, hname] : {std::pair{"ssm_beta.weight", "in_proj_b.weight"},
                                        std::pair{"ssm_alpha.weight", "in_proj_a.weight"}}) {
                std::string src = la + hname;
                add(b + gname, {E, H_v}, [=](float* dst) {
                    std::vector<float> w = hm->read(src, {H_v, E});
                    if (permute) reorder_rows(w, E, 0, 1, order);
                    std::copy(w.begin(), w.end(), dst);
                });
            }
            add(b + "ssm_conv1d.weight", {K, conv_dim}, [=](float* dst) {
                std::vector<float> w = hm->read(la + "conv1d.weight", {conv_dim, 1, K});
                if (permute) reorder_rows(w, K, 2 * key_dim, d_v, order);
                std::copy(w.begin(), w.end(), dst);
            });
            add(b + "ssm_dt.bias", {H_v}, [=](float* dst) {
                std::vector<float> w = hm->read(la + "dt_bias", {H_v});
                if (permute) reorder_rows(w, 1, 0, 1, order);
                std::copy(w.begin(), w.end(), dst);
            });
            add(b + "ssm_a", {H_v}, [=](float* dst) {
                std::vector<float> w = hm->read(la + "A_log", {H_v});
                if (permute) reorder_rows(w, 1, 0, 1, order);
                for (int64_t i = 0; i < H_v; ++i) dst[i] = -std::exp(w[(size_t)i]);
            });
            // The gated norm inside the DeltaNet multiplies by w itself: no +1.
            copy(b + "ssm_norm.weight", la + "norm.weight", {d_v});
            add(b + "ssm_out.weight", {value_dim, E}, [=](float* dst) {
                std::vector<float> w = hm->read(la + "out_proj.weight", {E, value_dim});
                if (permute) reorder_cols(w, E, value_dim, d_v, order);
                std::copy(w.begin(), w.end(), dst);
            });
        } else {
            const std::string sa = h + "self_attn.";
            copy(b + "attn_q.weight", sa + "q_proj.weight", {n_head * D * 2, E});
            copy(b + "attn_k.weight", sa + "k_proj.weight", {n_kv * D, E});
            copy(b + "attn_v.weight", sa + "v_proj.weight", {n_kv * D, E});
            copy(b + "attn_output.weight", sa + "o_proj.weight", {E, n_head * D});
            copy(b + "attn_q_norm.weight", sa + "q_norm.weight", {D}, 1.f);
            copy(b + "attn_k_norm.weight", sa + "k_norm.weight", {D}, 1.f);
        }
        copy(b + "post_attention_norm.weight", h + "post_attention_layernorm.weight", {E}, 1.f);
        if (m->moe) {
            plan_moe_ffn(m, plan, moe, b, h);
            continue;
        }
        copy(b + "ffn_gate.weight", h + "mlp.gate_proj.weight", {ffn, E});
        copy(b + "ffn_up.weight", h + "mlp.up_proj.weight", {ffn, E});
        copy(b + "ffn_down.weight", h + "mlp.down_proj.weight", {E, ffn});
    }
    copy("output_norm.weight", "norm.weight", {E}, 1.f);
    const bool tied = m->get_bool("tie_word_embeddings", false) || !m->tensor("lm_head.weight");
    if (!tied) copy("output.weight", "lm_head.weight", {n_vocab, E});
}

}  // namespace dl::convert
