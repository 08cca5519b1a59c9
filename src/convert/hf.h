// A Hugging Face model folder as the importer sees it: the text model's configuration (the
// nested text_config of multimodal checkpoints included), the safetensors checkpoint with the
// language model's tensor-name prefix resolved, and the tokenizer files.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "convert/plan.h"
#include "gguf/safetensors.h"
#include "model/model.h"

namespace dl::convert {

struct HfModel {
    std::string dir;
    std::string hf_arch;  // architectures[0] (or model_type when absent)
    Arch arch = Arch::llama;
    bool moe = false;       // the family's mixture-of-experts variant (qwen3moe, qwen35moe)
    nlohmann::json config;  // config.json as written
    nlohmann::json text;    // the text model's config (text_config when nested)
    safetensors::Checkpoint ckpt;
    std::string prefix;  // "model." or "model.language_model."

    static std::shared_ptr<HfModel> open(const std::string& dir);

    // Config values of the text model (text_config first, then the top level).
    bool has(const char* key) const;
    int64_t get_int(const char* key) const;  // throws naming config.json and the key
    int64_t get_int(const char* key, int64_t def) const;
    // A dimension or count: an integer from 1 to kMaxConfigSize, or dl::Error naming the key.
    static constexpr int64_t kMaxConfigSize = int64_t{1} << 31;
    static constexpr int64_t kMaxLayers = int64_t{1} << 16, kMaxVocab = int64_t{1} << 24;
    int64_t get_size(const char* key) const;
    int64_t get_size(const char* key, int64_t def) const;
    double get_float(const char* key, double def) const;
    bool get_bool(const char* key, bool def) const;
    const nlohmann::json* find(const char* key) const;
    // The trunk's sizes every transformer config names, each checked by get_size, and a head
    // size that leaves each attention head at least one dimension.
    struct TrunkSizes {
        int64_t n_embd, n_layer, n_ff, n_head, n_head_kv, head_dim;
    };
    TrunkSizes trunk_sizes() const;
    // rope_parameters (transformers 5) or rope_scaling / top-level keys (older configs).
    double rope_theta(double def) const;
    const nlohmann::json* rope_param(const char* key) const;

    // The checkpoint tensor "<prefix><name>" ("lm_head.weight" as is), which must have this
    // shape (outermost first); its elements as float32.
    const safetensors::Tensor* tensor(const std::string& name) const;
    std::vector<float> read(const std::string& name, const std::vector<int64_t>& shape) const;
};

// Mixture of experts (arch_moe.cpp): the expert keys of config.json, checked and written, and one
// layer's router, stacked experts and shared expert ("blk.N." / "layers.N." prefixes).
struct MoeSizes {
    int64_t n_expert = 0, n_used = 0, n_ff_exp = 0, n_ff_shexp = 0;
};
MoeSizes plan_expert_keys(const HfModel& m, Plan& plan);
void plan_moe_ffn(const std::shared_ptr<HfModel>& m, Plan& plan, const MoeSizes& s,
                  const std::string& b, const std::string& h);

// Tensor plans per architecture (arch_*.cpp): metadata and tensors of the model itself.
void plan_qwen35(const std::shared_ptr<HfModel>& m, Plan& plan);
void plan_llama_like(const std::shared_ptr<HfModel>& m, Plan& plan);  // qwen3 and llama

// Value-head reordering of Qwen3.5 (H_v != H_k): new head n holds reference head order[n].
std::vector<int64_t> value_head_order(int64_t n_k_heads, int64_t n_v_heads);
// llama.cpp's row order for llama q/k weights: within each head, reference rows (i, i + D/2)
// (rotate-half pairs) become rows (2i, 2i + 1) (adjacent pairs). New row r holds old row [r].
std::vector<int64_t> llama_rope_row_order(int64_t n_heads, int64_t head_dim);

// tokenizer.ggml.* and tokenizer.chat_template from tokenizer.json / tokenizer_config.json.
void plan_tokenizer(const HfModel& m, int64_t n_vocab, Plan& plan);

// The common "{arch}.*" attention keys of every architecture.
void plan_attention_keys(const HfModel& m, Plan& plan, int64_t head_dim);

}  // namespace dl::convert
