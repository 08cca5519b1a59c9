// Tiny GGUF models with random weights, built in memory with gguf::Writer, for the model and CPU
// chain tests. The same spec and seed give the same float weights whatever type the matrices are
// stored in, so a quantized model can be held against its f32 twin.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/quant.h"

namespace dl::test {

struct TinySpec {
    std::string arch = "qwen35";
    int64_t n_embd = 64, n_layer = 4, n_ff = 96, n_vocab = 80;
    int64_t n_head = 4, n_head_kv = 2, head_dim = 32, rope_dims = 8;
    float rope_base = 10000.f, rms_eps = 1e-6f;
    // qwen35
    int64_t interval = 4, H_k = 2, H_v = 4, d_state = 16, conv_kernel = 4, n_nextn = 0;
    bool per_layer_kv_array = false;  // layer pattern as attention.head_count_kv array
    bool tied = false;
    bool rope_freqs = false;         // llama-3 style divisors
    QType matrix_type = QType::F32;  // every 2-D weight but ssm_conv1d
    // A Q4_K_M file's mix: Q6_K for the output head (or the tied embedding) and, in every other
    // layer, ffn_down, attn_v and attn_qkv; matrix_type for the rest.
    bool q4_k_m = false;
    // Scale of the matrices that write into the residual stream (attn_output, ssm_out,
    // ffn_down): below 1, each layer adds a smaller update and errors grow less from layer to
    // layer.
    double residual_gain = 1.0;
    uint64_t seed = 1;
    // Mixture of experts (arch qwen35moe or qwen3moe): experts, used per token, their width,
    // the shared expert's width (0: none), and gate and up stacked in one tensor.
    int64_t n_expert = 8, n_expert_used = 2, n_ff_exp = 32, n_ff_shexp = 0;
    bool fused_gate_up = false;
    // Damage for the load-error tests.
    std::string drop_tensor;    // leave this tensor out
    std::string widen_tensor;   // give this tensor one more row (ne[1] + 1, or ne[0] + 1 for 1-D)
    std::string arch_override;  // general.architecture written instead of arch
};

// Keeps the file bytes alive as long as the model that points into them.
struct TinyFile {
    std::vector<uint8_t> bytes;
    std::shared_ptr<const gguf::File> file;
};

// The dense family of an architecture (qwen35moe -> qwen35), and whether it has experts.
inline std::string family(const std::string& arch) {
    return arch.size() > 3 && arch.compare(arch.size() - 3, 3, "moe") == 0
               ? arch.substr(0, arch.size() - 3)
               : arch;
}
inline bool is_moe(const TinySpec& s) {
    return family(s.arch) != s.arch;
}

inline bool is_recurrent_layer(const TinySpec& s, int64_t il) {
    return family(s.arch) == "qwen35" && (il + 1) % s.interval != 0;
}

// Float values of one tensor, from the seed and the tensor's name only.
inline std::vector<float> tiny_values(const TinySpec& s, const std::string& name, int64_t n,
                                      double mean, double sd) {
    std::seed_seq seq{s.seed, std::hash<std::string>{}(name)};
    std::mt19937_64 rng(seq);
    std::normal_distribution<double> nd(mean, sd);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = static_cast<float>(nd(rng));
    return v;
}

inline std::vector<uint8_t> tiny_gguf(const TinySpec& s) {
    gguf::Writer w;
    const std::string a = family(s.arch);  // the branches below; keys carry the whole name
    auto key = [&](const char* k) { return s.arch + "." + k; };
    w.set("general.architecture",
          gguf::Value::str(s.arch_override.empty() ? s.arch : s.arch_override));
    if (is_moe(s)) {
        w.set(key("expert_count"), gguf::Value::u32(static_cast<uint32_t>(s.n_expert)));
        w.set(key("expert_used_count"), gguf::Value::u32(static_cast<uint32_t>(s.n_expert_used)));
        w.set(key("expert_feed_forward_length"),
              gguf::Value::u32(static_cast<uint32_t>(s.n_ff_exp)));
        if (s.n_ff_shexp > 0)
            w.set(key("expert_shared_feed_forward_length"),
                  gguf::Value::u32(static_cast<uint32_t>(s.n_ff_shexp)));
    }
    w.set("general.name", gguf::Value::str("tiny-" + a));
    w.set(key("block_count"), gguf::Value::u32(static_cast<uint32_t>(s.n_layer + s.n_nextn)));
    w.set(key("context_length"), gguf::Value::u32(4096));
    w.set(key("embedding_length"), gguf::Value::u32(static_cast<uint32_t>(s.n_embd)));
    w.set(key("feed_forward_length"), gguf::Value::u32(static_cast<uint32_t>(s.n_ff)));
    w.set(key("attention.head_count"), gguf::Value::u32(static_cast<uint32_t>(s.n_head)));
    if (s.per_layer_kv_array) {
        std::vector<int32_t> kv;
        for (int64_t il = 0; il < s.n_layer + s.n_nextn; ++il)
            kv.push_back(is_recurrent_layer(s, il) ? 0 : static_cast<int32_t>(s.n_head_kv));
        w.set(key("attention.head_count_kv"), gguf::Value::array_of_i32(kv));
    } else {
        w.set(key("attention.head_count_kv"), gguf::Value::u32(static_cast<uint32_t>(s.n_head_kv)));
    }
    w.set(key("attention.key_length"), gguf::Value::u32(static_cast<uint32_t>(s.head_dim)));
    w.set(key("attention.value_length"), gguf::Value::u32(static_cast<uint32_t>(s.head_dim)));
    w.set(key("attention.layer_norm_rms_epsilon"), gguf::Value::f32(s.rms_eps));
    w.set(key("rope.freq_base"), gguf::Value::f32(s.rope_base));
    w.set(key("rope.dimension_count"), gguf::Value::u32(static_cast<uint32_t>(s.rope_dims)));
    if (a == "qwen35") {
        if (!s.per_layer_kv_array)
            w.set(key("full_attention_interval"),
                  gguf::Value::u32(static_cast<uint32_t>(s.interval)));
        w.set(key("ssm.conv_kernel"), gguf::Value::u32(static_cast<uint32_t>(s.conv_kernel)));
        w.set(key("ssm.state_size"), gguf::Value::u32(static_cast<uint32_t>(s.d_state)));
        w.set(key("ssm.group_count"), gguf::Value::u32(static_cast<uint32_t>(s.H_k)));
        w.set(key("ssm.time_step_rank"), gguf::Value::u32(static_cast<uint32_t>(s.H_v)));
        w.set(key("ssm.inner_size"), gguf::Value::u32(static_cast<uint32_t>(s.H_v * s.d_state)));
        if (s.n_nextn > 0)
            w.set(key("nextn_predict_layers"), gguf::Value::u32(static_cast<uint32_t>(s.n_nextn)));
    }

    auto add = [&](const std::string& name, std::vector<int64_t> ne, QType type, double mean,
                   double sd) {
        if (name == s.drop_tensor) return;
        if (name == s.widen_tensor) ne[ne.size() > 1 ? 1 : 0] += 1;
        int64_t n = 1;
        for (int64_t d : ne) n *= d;
        std::vector<float> v = tiny_values(s, name, n, mean, sd);
        std::vector<uint8_t> bytes(row_size(type, ne[0]) * static_cast<size_t>(n / ne[0]));
        if (type == QType::F32)
            std::memcpy(bytes.data(), v.data(), bytes.size());
        else
            for (int64_t r = 0; r < n / ne[0]; ++r)
                quant::quantize(type, v.data() + r * ne[0],
                                bytes.data() + r * row_size(type, ne[0]), ne[0]);
        w.add_tensor(name, type, std::move(ne), std::move(bytes));
    };
    const QType mt = s.matrix_type;
    // A matrix [out, in] (ne = {in, out}) with unit-variance outputs for unit-variance inputs.
    auto matrix = [&](const std::string& name, int64_t in, int64_t out, double gain = 1.0,
                      bool six_bits = false) {
        add(name, {in, out}, s.q4_k_m && six_bits ? QType::Q6_K : mt, 0.0,
            gain / std::sqrt(double(in)));
    };
    auto norm = [&](const std::string& name, int64_t n) { add(name, {n}, QType::F32, 1.0, 0.1); };
    const int64_t E = s.n_embd, D = s.head_dim;
    add("token_embd.weight", {E, s.n_vocab}, s.q4_k_m && s.tied ? QType::Q6_K : mt, 0.0, 1.0);
    norm("output_norm.weight", E);
    if (!s.tied) matrix("output.weight", E, s.n_vocab, 1.0, true);
    if (s.rope_freqs) add("rope_freqs.weight", {s.rope_dims / 2}, QType::F32, 1.5, 0.3);
    for (int64_t il = 0; il < s.n_layer + s.n_nextn; ++il) {
        auto b = [il](const char* what) { return "blk." + std::to_string(il) + "." + what; };
        const bool six = il % 2 == 0;
        norm(b("attn_norm.weight"), E);
        norm(b(a == "qwen35" ? "post_attention_norm.weight" : "ffn_norm.weight"), E);
        if (is_moe(s)) {
            const int64_t F = s.n_ff_exp, X = s.n_expert;
            // Router logits of a few units, so that top-k choices are rarely near a tie; in F32
            // whatever the matrices' type, as llama-quantize leaves the router.
            add(b("ffn_gate_inp.weight"), {E, X}, QType::F32, 0.0, 3.0 / std::sqrt(double(E)));
            if (s.fused_gate_up) {
                add(b("ffn_gate_up_exps.weight"), {E, 2 * F, X}, mt, 0.0,
                    1.0 / std::sqrt(double(E)));
            } else {
                add(b("ffn_gate_exps.weight"), {E, F, X}, mt, 0.0, 1.0 / std::sqrt(double(E)));
                add(b("ffn_up_exps.weight"), {E, F, X}, mt, 0.0, 1.0 / std::sqrt(double(E)));
            }
            add(b("ffn_down_exps.weight"), {F, E, X}, mt, 0.0,
                s.residual_gain / std::sqrt(double(F)));
            if (s.n_ff_shexp > 0) {
                add(b("ffn_gate_inp_shexp.weight"), {E}, QType::F32, 0.0,
                    1.0 / std::sqrt(double(E)));
                matrix(b("ffn_gate_shexp.weight"), E, s.n_ff_shexp);
                matrix(b("ffn_up_shexp.weight"), E, s.n_ff_shexp);
                matrix(b("ffn_down_shexp.weight"), s.n_ff_shexp, E, s.residual_gain, six);
            }
        } else {
            matrix(b("ffn_gate.weight"), E, s.n_ff);
            matrix(b("ffn_up.weight"), E, s.n_ff);
            matrix(b("ffn_down.weight"), s.n_ff, E, s.residual_gain, six);
        }
        if (is_recurrent_layer(s, il)) {
            const int64_t conv_dim = 2 * s.H_k * s.d_state + s.H_v * s.d_state;
            matrix(b("attn_qkv.weight"), E, conv_dim, 1.0, six);
            matrix(b("attn_gate.weight"), E, s.H_v * s.d_state);
            matrix(b("ssm_beta.weight"), E, s.H_v);
            matrix(b("ssm_alpha.weight"), E, s.H_v);
            add(b("ssm_conv1d.weight"), {s.conv_kernel, conv_dim}, QType::F32, 0.0, 0.5);
            add(b("ssm_dt.bias"), {s.H_v}, QType::F32, 0.5, 0.5);
            // -exp(A_log) with A_log around 0: decays between ~0.3 and ~3 per unit of dt.
            std::string an = b("ssm_a");
            if (an != s.drop_tensor) {
                std::vector<float> al = tiny_values(s, an, s.H_v, 0.0, 0.5);
                for (auto& x : al) x = -std::exp(x);
                std::vector<uint8_t> bytes(al.size() * 4);
                std::memcpy(bytes.data(), al.data(), bytes.size());
                std::vector<int64_t> ne{s.H_v};
                if (an == s.widen_tensor) {
                    ne[0] += 1;
                    bytes.resize(bytes.size() + 4);
                }
                w.add_tensor(an, QType::F32, ne, std::move(bytes));
            }
            norm(b("ssm_norm.weight"), s.d_state);
            matrix(b("ssm_out.weight"), s.H_v * s.d_state, E, s.residual_gain);
        } else {
            const int64_t q_rows = s.n_head * D * (a == "qwen35" ? 2 : 1);
            matrix(b("attn_q.weight"), E, q_rows);
            matrix(b("attn_k.weight"), E, s.n_head_kv * D);
            matrix(b("attn_v.weight"), E, s.n_head_kv * D, 1.0, six);
            matrix(b("attn_output.weight"), s.n_head * D, E, s.residual_gain);
            if (a != "llama") {
                norm(b("attn_q_norm.weight"), D);
                norm(b("attn_k_norm.weight"), D);
            }
        }
    }
    return w.to_bytes();
}

inline std::shared_ptr<const gguf::File> tiny_file(const TinySpec& s) {
    auto holder = std::make_shared<TinyFile>();
    holder->bytes = tiny_gguf(s);
    holder->file = std::make_shared<gguf::File>(
        gguf::File::parse(holder->bytes.data(), holder->bytes.size(), "tiny-" + s.arch + ".gguf"));
    // The returned pointer keeps the bytes alive through the aliasing constructor.
    return std::shared_ptr<const gguf::File>(holder, holder->file.get());
}

inline std::shared_ptr<const Model> tiny_model(const TinySpec& s) {
    return Model::from_file(tiny_file(s));
}

// n token ids below n_vocab from a fixed linear congruential sequence: the same seed gives the
// same prompt in every test and on every machine.
inline std::vector<int32_t> tiny_tokens(int64_t n, int64_t n_vocab, uint32_t seed = 7) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    uint32_t x = seed;
    for (auto& v : t) {
        x = x * 1664525u + 1013904223u;
        v = static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(n_vocab));
    }
    return t;
}

}  // namespace dl::test
