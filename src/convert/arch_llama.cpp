// Qwen3 and Llama import: plain RMSNorms, per-head q/k norms (Qwen3), and for Llama the q/k row
// permutation llama.cpp applies so that its rope rotates adjacent pairs, plus llama-3 style
// frequency factors (rope_freqs) when the config asks for them.
#include <cmath>
#include <functional>

#include "convert/hf.h"
#include "core/error.h"

namespace dl::convert {

std::vector<int64_t> llama_rope_row_order(int64_t n_heads, int64_t head_dim) {
    std::vector<int64_t> order((size_t)(n_heads * head_dim));
    const int64_t half = head_dim / 2;
    for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t i = 0; i < half; ++i)
            for (int64_t j = 0; j < 2; ++j)
                order[(size_t)(h * head_dim + 2 * i + j)] = h * head_dim + j * half + i;
    return order;
}

// llama-3 rope scaling: per frequency pair a divisor, 1 for short wavelengths, `factor` for long
// ones and a smooth blend between.
static std::vector<float> llama3_rope_factors(const HfModel& m, int64_t rope_dims, double theta) {
    auto num = [&](const char* k, double def) {
        const nlohmann::json* j = m.rope_param(k);
        return j && j->is_number() ? j->get<double>() : def;
    };
    const double factor = num("factor", 8.0), low = num("low_freq_factor", 1.0),
                 high = num("high_freq_factor", 4.0),
                 old_ctx = num("original_max_position_embeddings", 8192.0);
    const double low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
    std::vector<float> f((size_t)(rope_dims / 2));
    for (int64_t i = 0; i < rope_dims / 2; ++i) {
        double freq = 1.0 / std::pow(theta, 2.0 * (double)i / (double)rope_dims);
        double wavelen = 2 * M_PI / freq;
        double r;
        if (wavelen < high_wavelen)
            r = 1.0;
        else if (wavelen > low_wavelen)
            r = factor;
        else {
            double smooth = (old_ctx / wavelen - low) / (high - low);
            r = 1.0 / ((1 - smooth) / factor + smooth);
        }
        f[(size_t)i] = (float)r;
    }
    return f;
}

void plan_llama_like(const std::shared_ptr<HfModel>& m, Plan& plan) {
    const bool qwen3 = m->arch == Arch::qwen3;
    const HfModel::TrunkSizes sizes = m->trunk_sizes();
    const int64_t E = sizes.n_embd, n_layer = sizes.n_layer, ffn = sizes.n_ff;
    const int64_t n_head = sizes.n_head, n_kv = sizes.n_head_kv, D = sizes.head_dim;
    const int64_t n_vocab = m->get_size("vocab_size");
    if (m->get_bool("attention_bias", false))
        fail("{}: attention biases are not supported", m->dir);

    const std::string a = plan.arch + ".";
    plan_attention_keys(*m, plan, D);
    const MoeSizes moe = m->moe ? plan_expert_keys(*m, plan) : MoeSizes{};
    plan.set(a + "rope.dimension_count", gguf::Value::u32((uint32_t)D));
    if (!qwen3) plan.set(a + "vocab_size", gguf::Value::u32((uint32_t)n_vocab));

    auto hm = m;
    auto add = [&](std::string name, std::vector<int64_t> ne, std::function<void(float*)> f) {
        plan.tensors.push_back({std::move(name), std::move(ne), std::move(f), {}});
    };
    auto copy = [&](const std::string& gguf_name, const std::string& hf_name,
                    std::vector<int64_t> shape) {
        std::vector<int64_t> ne(shape.rbegin(), shape.rend());
        add(gguf_name, ne, [hm, hf_name, shape](float* dst) {
            std::vector<float> v = hm->read(hf_name, shape);
            std::copy(v.begin(), v.end(), dst);
        });
    };
    // q/k rows in the order llama.cpp's (adjacent-pair) rope expects.
    auto permuted = [&](const std::string& gguf_name, const std::string& hf_name, int64_t heads) {
        std::vector<int64_t> order = llama_rope_row_order(heads, D);
        add(gguf_name, {E, heads * D}, [hm, hf_name, heads, order, D = D, E = E](float* dst) {
            std::vector<float> v = hm->read(hf_name, {heads * D, E});
            for (size_t r = 0; r < order.size(); ++r)
                std::copy_n(v.begin() + order[r] * E, E, dst + r * E);
        });
    };

    const std::string rope_type = [&] {
        const nlohmann::json* t = m->rope_param("rope_type");
        if (!t) t = m->rope_param("type");
        return t && t->is_string() ? t->get<std::string>() : std::string("default");
    }();
    if (rope_type == "llama3" && !qwen3) {
        std::vector<float> f = llama3_rope_factors(*m, D, m->rope_theta(10000.0));
        add("rope_freqs.weight", {(int64_t)f.size()},
            [f](float* dst) { std::copy(f.begin(), f.end(), dst); });
    } else if (rope_type != "default") {
        fail("{}: rope scaling '{}' is not supported", m->dir, rope_type);
    }

    copy("token_embd.weight", "embed_tokens.weight", {n_vocab, E});
    for (int64_t il = 0; il < n_layer; ++il) {
        const std::string b = "blk." + std::to_string(il) + ".";
        const std::string h = "layers." + std::to_string(il) + ".";
        const std::string sa = h + "self_attn.";
        copy(b + "attn_norm.weight", h + "input_layernorm.weight", {E});
        if (qwen3) {
            copy(b + "attn_q.weight", sa + "q_proj.weight", {n_head * D, E});
            copy(b + "attn_k.weight", sa + "k_proj.weight", {n_kv * D, E});
            copy(b + "attn_q_norm.weight", sa + "q_norm.weight", {D});
            copy(b + "attn_k_norm.weight", sa + "k_norm.weight", {D});
        } else {
            permuted(b + "attn_q.weight", sa + "q_proj.weight", n_head);
            permuted(b + "attn_k.weight", sa + "k_proj.weight", n_kv);
        }
        copy(b + "attn_v.weight", sa + "v_proj.weight", {n_kv * D, E});
        copy(b + "attn_output.weight", sa + "o_proj.weight", {E, n_head * D});
        copy(b + "ffn_norm.weight", h + "post_attention_layernorm.weight", {E});
        if (m->moe) {
            plan_moe_ffn(m, plan, moe, b, h);
            continue;
        }
        copy(b + "ffn_gate.weight", h + "mlp.gate_proj.weight", {ffn, E});
        copy(b + "ffn_up.weight", h + "mlp.up_proj.weight", {ffn, E});
        copy(b + "ffn_down.weight", h + "mlp.down_proj.weight", {E, ffn});
    }
    copy("output_norm.weight", "norm.weight", {E});
    const bool tied = m->get_bool("tie_word_embeddings", false) || !m->tensor("lm_head.weight");
    if (!tied) copy("output.weight", "lm_head.weight", {n_vocab, E});
}

}  // namespace dl::convert
