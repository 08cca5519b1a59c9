// What the per-architecture loaders (qwen35.cpp, qwen3.cpp, llama.cpp) share: typed metadata
// reads under the architecture's key prefix and tensor binding with shape and type checks, so
// that every malformed file ends in one dl::Error sentence naming the key or the tensor.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"

namespace dl {

// How a bound tensor is used, which decides the types it may have.
enum class Use {
    matrix,     // multiplied with activations: needs a CPU dot product
    embedding,  // rows looked up: needs dequantization
    vector,     // small per-channel parameters, read once as floats: needs dequantization
};

struct ModelBuilder {
    explicit ModelBuilder(std::shared_ptr<const gguf::File> file);

    std::shared_ptr<Model> model;
    const gguf::File& file;
    std::string arch;  // general.architecture

    std::string key(const char* suffix) const { return arch + "." + suffix; }
    int64_t get_int(const char* suffix) const;
    int64_t get_int(const char* suffix, int64_t def) const;
    float get_float(const char* suffix, float def) const;
    bool has(const char* suffix) const { return file.has(key(suffix)); }

    // The tensor with this name and exactly these dimensions (ne order: contiguous first), of a
    // type fit for its use; throws a sentence naming the tensor otherwise. Optional tensors
    // return nullptr when absent (but are still checked when present).
    const Tensor* bind(const std::string& name, std::vector<int64_t> ne, Use use,
                       bool required = true);
    static std::string blk(int64_t layer, const char* what) {
        return "blk." + std::to_string(layer) + "." + what;
    }

    // Shared by every architecture: vocabulary size, token embedding, output norm and head
    // (tied to the embedding when output.weight is absent).
    void bind_embeddings_and_head();
    // The feed-forward tensors of one layer (SwiGLU, or the experts and router when
    // hp.ffn_kind is experts); norm_name is the pre-FFN norm's name.
    void bind_ffn(int64_t layer, const char* norm_name);
    // The mixture-of-experts hyper-parameters ({arch}.expert_count, ...), checked.
    void load_expert_hparams();
    // A positive integer hyper-parameter; zero or negative values are a malformed file.
    int64_t positive(const char* suffix) const;
    int64_t positive(const char* suffix, int64_t def) const;
};

// Per-architecture loaders, each filling hparams and layers.
void load_qwen35(ModelBuilder& b);
void load_qwen3(ModelBuilder& b);
void load_llama(ModelBuilder& b);
// llama's blocks, with per-head q/k norms when qk_norm (qwen3).
void load_llama_like(ModelBuilder& b, bool qk_norm);
// The attention hyper-parameters common to the three architectures.
void load_attention_hparams(ModelBuilder& b);

}  // namespace dl
