// Mixture-of-experts import (Qwen3MoE, Qwen3.5-MoE): the router, each layer's experts stacked
// into one tensor per projection in expert order (gate and up as [E, F, n_expert], down as
// [F, E, n_expert], as llama.cpp's converter writes them), and Qwen3.5's shared expert with its
// gate. Checkpoints store one module per expert (mlp.experts.<e>.{gate,up,down}_proj, Qwen3MoE) or
// every expert in one tensor per projection (mlp.experts.gate_up_proj [n_expert, 2 F, E], each
// expert's gate rows then its up rows, and mlp.experts.down_proj [n_expert, E, F], Qwen3.5-MoE).
#include <algorithm>
#include <functional>

#include "convert/hf.h"
#include "core/error.h"

namespace dl::convert {

MoeSizes plan_expert_keys(const HfModel& m, Plan& plan) {
    MoeSizes s;
    // Checkpoints name the count num_experts; transformers 5 saves Qwen3MoE's as
    // num_local_experts.
    s.n_expert = m.has("num_experts") ? m.get_size("num_experts") : m.get_size("num_local_experts");
    s.n_used = m.get_size("num_experts_per_tok");
    s.n_ff_exp = m.get_size("moe_intermediate_size");
    s.n_ff_shexp = m.has("shared_expert_intermediate_size")
                       ? m.get_size("shared_expert_intermediate_size")
                       : 0;
    if (s.n_used > s.n_expert || s.n_expert > 4096)
        fail("{}/config.json: {} experts with {} per token is not a mixture deltallm runs", m.dir,
             s.n_expert, s.n_used);
    // The forward pass renormalises the chosen experts' weights and puts experts in every layer;
    // a checkpoint that does otherwise would convert into a file that answers wrongly.
    if (!m.get_bool("norm_topk_prob", true))
        fail("{}/config.json: norm_topk_prob false (unnormalised expert weights) is not supported",
             m.dir);
    if (m.get_int("decoder_sparse_step", 1) != 1)
        fail(
            "{}/config.json: decoder_sparse_step other than 1 (dense layers between the MoE "
            "layers) is not supported",
            m.dir);
    if (const nlohmann::json* only = m.find("mlp_only_layers"); only && !only->empty())
        fail("{}/config.json: mlp_only_layers (dense layers among the MoE layers) is not supported",
             m.dir);
    const std::string a = plan.arch + ".";
    auto u32 = [](int64_t x) { return gguf::Value::u32((uint32_t)x); };
    plan.set(a + "expert_count", u32(s.n_expert));
    plan.set(a + "expert_used_count", u32(s.n_used));
    plan.set(a + "expert_feed_forward_length", u32(s.n_ff_exp));
    if (s.n_ff_shexp > 0) plan.set(a + "expert_shared_feed_forward_length", u32(s.n_ff_shexp));
    plan.n_expert = (int)s.n_expert;
    return s;
}

void plan_moe_ffn(const std::shared_ptr<HfModel>& m, Plan& plan, const MoeSizes& s,
                  const std::string& b, const std::string& h) {
    const int64_t E = m->get_size("hidden_size"), F = s.n_ff_exp, X = s.n_expert;
    const std::string mlp = h + "mlp.";
    const bool fused = m->tensor(mlp + "experts.gate_up_proj") != nullptr;
    if (!fused && !m->tensor(mlp + "experts.0.gate_proj.weight"))
        fail(
            "{}: neither '{}experts.0.gate_proj.weight' nor '{}experts.gate_up_proj' is in the "
            "checkpoint: its experts are stored in a layout this converter does not read",
            m->dir, m->prefix + mlp, m->prefix + mlp);
    auto add = [&](std::string name, std::vector<int64_t> ne, std::function<void(float*)> f) {
        plan.tensors.push_back({std::move(name), std::move(ne), std::move(f), {}});
    };
    auto hm = m;
    add(b + "ffn_gate_inp.weight", {E, X}, [hm, mlp, E, X](float* dst) {
        const std::vector<float> v = hm->read(mlp + "gate.weight", {X, E});
        std::copy(v.begin(), v.end(), dst);
    });
    // One expert's [rows, cols] matrix after another.
    auto stack = [&](const std::string& gguf, const char* proj, int64_t rows, int64_t cols) {
        add(b + gguf, {cols, rows, X}, [hm, mlp, proj, rows, cols, X](float* dst) {
            for (int64_t e = 0; e < X; ++e) {
                const std::vector<float> v = hm->read(
                    mlp + "experts." + std::to_string(e) + "." + proj + ".weight", {rows, cols});
                std::copy(v.begin(), v.end(), dst + e * rows * cols);
            }
        });
    };
    // From the tensors of every expert: rows [first, first + rows) of each expert's matrix of
    // expert_rows rows, one expert after another.
    auto from_fused = [&](const std::string& gguf, const char* hf, int64_t expert_rows,
                          int64_t first, int64_t rows, int64_t cols) {
        add(b + gguf, {cols, rows, X},
            [hm, mlp, hf, expert_rows, first, rows, cols, X](float* dst) {
                const std::vector<float> v = hm->read(mlp + hf, {X, expert_rows, cols});
                for (int64_t e = 0; e < X; ++e)
                    std::copy_n(v.begin() + (e * expert_rows + first) * cols, rows * cols,
                                dst + e * rows * cols);
            });
    };
    if (fused) {
        from_fused("ffn_gate_exps.weight", "experts.gate_up_proj", 2 * F, 0, F, E);
        from_fused("ffn_up_exps.weight", "experts.gate_up_proj", 2 * F, F, F, E);
        from_fused("ffn_down_exps.weight", "experts.down_proj", E, 0, E, F);
    } else {
        stack("ffn_gate_exps.weight", "gate_proj", F, E);
        stack("ffn_up_exps.weight", "up_proj", F, E);
        stack("ffn_down_exps.weight", "down_proj", E, F);
    }
    if (s.n_ff_shexp > 0) {
        const int64_t S = s.n_ff_shexp;
        auto copy = [&](const std::string& gguf, const std::string& hf,
                        std::vector<int64_t> shape) {
            std::vector<int64_t> ne(shape.rbegin(), shape.rend());
            add(b + gguf, ne, [hm, hf, shape](float* dst) {
                const std::vector<float> v = hm->read(hf, shape);
                std::copy(v.begin(), v.end(), dst);
            });
        };
        copy("ffn_gate_inp_shexp.weight", mlp + "shared_expert_gate.weight", {1, E});
        copy("ffn_gate_shexp.weight", mlp + "shared_expert.gate_proj.weight", {S, E});
        copy("ffn_up_shexp.weight", mlp + "shared_expert.up_proj.weight", {S, E});
        copy("ffn_down_shexp.weight", mlp + "shared_expert.down_proj.weight", {E, S});
    }
}

}  // namespace dl::convert
