// A loaded model: hyper-parameters and views of the weight tensors of a GGUF file, immutable
// after load and shared by every session and executor. One file per architecture
// (model/qwen35.cpp, qwen3.cpp, llama.cpp) says which metadata keys and tensors it needs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "quant/types.h"

namespace dl {

enum class Arch { qwen35, qwen3, llama };

// The features of a model that the executors test (never the architecture's name): what each
// layer's mixer is, how attention rotates and gates, what the feed-forward network is.
enum class LayerKind : uint8_t {
    attention,  // softmax attention over a KV cache
    deltanet,   // Gated DeltaNet: causal conv + the gated delta rule over a recurrent state
};
enum class RopeStyle : uint8_t {
    neox,         // dims j and j + n_rot/2 form a pair (Qwen; files keep q/k rows as trained)
    interleaved,  // dims 2j and 2j+1 form a pair (llama files, whose q/k rows are permuted)
};
enum class FfnKind : uint8_t {
    swiglu,   // down · (SiLU(gate · x) * (up · x))
    experts,  // a router picks n_expert_used of n_expert SwiGLU experts per token; their
              // outputs weighted by the renormalised router probabilities, plus a shared
              // expert gated by sigmoid(w · x) where the model has one
};

// A weight tensor inside the mapped file. ne[0] is the contiguous (input) dimension: a matrix
// W of [out, in] in the math is stored with ne = {in, out}.
struct Tensor {
    std::string name;
    QType type = QType::F32;
    std::vector<int64_t> ne;
    const uint8_t* data = nullptr;
    size_t nbytes = 0;

    int64_t cols() const { return ne.empty() ? 0 : ne[0]; }     // input dim
    int64_t rows() const { return ne.size() < 2 ? 1 : ne[1]; }  // output dim
    // One matrix of a stack of them ([cols, rows, n]): the i-th, as a tensor of its own.
    Tensor matrix(int64_t i) const;
    size_t row_bytes() const { return row_size(type, cols()); }
    const uint8_t* row(int64_t r) const { return data + (size_t)r * row_bytes(); }
    int64_t n_elements() const;
};

struct Hparams {
    Arch arch = Arch::llama;
    std::string arch_name;   // as in general.architecture
    std::string model_name;  // general.name, if any
    int64_t n_vocab = 0;
    int64_t n_embd = 0;
    int64_t n_layer = 0;  // trunk layers (MTP blocks excluded)
    int64_t n_ff = 0;
    int64_t n_head = 0;
    int64_t n_head_kv = 0;
    int64_t head_dim = 0;   // attention key length
    int64_t value_dim = 0;  // attention value length
    int64_t n_ctx_train = 0;
    float rms_eps = 1e-6f;
    float rope_base = 10000.f;
    int64_t rope_dims = 0;  // rotated dims per head (qwen35: 64 of 256)
    RopeStyle rope_style = RopeStyle::neox;
    // Multimodal rotary sections (rope.dimension_sections, qwen35): the rotated dims split
    // between time, height and width positions. Text gives every section the same position,
    // so for text the rotation is the plain one over rope_dims; kept for what the file says.
    std::vector<int64_t> rope_sections;
    // llama-3 style frequency scaling: per-pair divisors from the rope_freqs tensor, if present.
    bool tied_embeddings = false;

    // Attention features.
    bool attn_output_gate = false;  // W_q yields [q | gate] per head; o *= sigmoid(gate)
    bool qk_norm = false;           // an RMSNorm of every query and key head before the rotary

    FfnKind ffn_kind = FfnKind::swiglu;
    // Mixture-of-experts layers (FfnKind::experts).
    int64_t n_expert = 0;       // experts per layer
    int64_t n_expert_used = 0;  // chosen per token
    int64_t n_ff_exp = 0;       // an expert's hidden width
    int64_t n_ff_shexp = 0;     // the shared expert's hidden width (0: none)

    // The mixer of each trunk layer.
    std::vector<LayerKind> layer_kinds;

    // Gated DeltaNet layers
    int64_t ssm_conv_kernel = 0;  // 4
    int64_t ssm_d_state = 0;      // d_k = d_v = 128
    int64_t ssm_n_k_heads = 0;    // H_k (ssm.group_count)
    int64_t ssm_n_v_heads = 0;    // H_v (ssm.time_step_rank)
    int64_t ssm_d_inner = 0;      // H_v * d_v
    int64_t n_nextn = 0;          // MTP blocks at the end of the file, skipped by the trunk

    int64_t conv_dim() const { return 2 * ssm_n_k_heads * ssm_d_state + ssm_d_inner; }
    LayerKind layer_kind(int64_t layer) const { return layer_kinds[static_cast<size_t>(layer)]; }
    bool is_recurrent(int64_t layer) const { return layer_kind(layer) == LayerKind::deltanet; }
    // Width of a query row as W_q writes it: [q | gate] per head with the output gate.
    int64_t q_width() const { return n_head * head_dim * (attn_output_gate ? 2 : 1); }
};

struct Layer {
    // every architecture
    const Tensor* attn_norm = nullptr;
    const Tensor* ffn_norm = nullptr;  // qwen35: post_attention_norm
    const Tensor* ffn_gate = nullptr;
    const Tensor* ffn_up = nullptr;
    const Tensor* ffn_down = nullptr;
    // mixture-of-experts layers: the router [E, n_expert]; the experts stacked, [E, n_ff_exp,
    // n_expert] for gate and up (or both in ffn_gate_up_exps, [E, 2 n_ff_exp, n_expert], gate
    // rows first) and [n_ff_exp, E, n_expert] for down; the shared expert and its gate [E]
    const Tensor* ffn_gate_inp = nullptr;
    const Tensor* ffn_gate_exps = nullptr;
    const Tensor* ffn_up_exps = nullptr;
    const Tensor* ffn_gate_up_exps = nullptr;
    const Tensor* ffn_down_exps = nullptr;
    const Tensor* ffn_gate_inp_shexp = nullptr;
    const Tensor* ffn_gate_shexp = nullptr;
    const Tensor* ffn_up_shexp = nullptr;
    const Tensor* ffn_down_shexp = nullptr;
    // attention layers (qwen35: wq also yields the output gate, per head [q | gate])
    const Tensor* wq = nullptr;
    const Tensor* wk = nullptr;
    const Tensor* wv = nullptr;
    const Tensor* wo = nullptr;
    const Tensor* q_norm = nullptr;
    const Tensor* k_norm = nullptr;
    // Gated DeltaNet layers (qwen35)
    const Tensor* ssm_qkv = nullptr;  // attn_qkv
    const Tensor* ssm_z = nullptr;    // attn_gate
    const Tensor* ssm_beta = nullptr;
    const Tensor* ssm_alpha = nullptr;
    const Tensor* ssm_conv1d = nullptr;  // ne = {kernel, conv_dim}
    const Tensor* ssm_dt_bias = nullptr;
    const Tensor* ssm_a = nullptr;     // holds -exp(A_log)
    const Tensor* ssm_norm = nullptr;  // used as is (no +1)
    const Tensor* ssm_out = nullptr;
};

class Model {
  public:
    using Progress = std::function<void(double fraction)>;
    // Loads and validates (architecture known, every needed tensor present with the right shape
    // and a type the CPU chain can compute with). Throws dl::Error with one sentence otherwise.
    static std::shared_ptr<const Model> load(const std::string& path, Progress progress = {});
    static std::shared_ptr<const Model> from_file(std::shared_ptr<const gguf::File> file);

    Hparams hp;
    std::vector<Layer> layers;
    const Tensor* tok_embd = nullptr;
    const Tensor* output_norm = nullptr;
    const Tensor* output = nullptr;      // == tok_embd when tied
    const Tensor* rope_freqs = nullptr;  // llama-3.1 style, optional

    const gguf::File& file() const { return *file_; }
    const std::vector<Tensor>& tensors() const { return tensors_; }
    const Tensor* find(const std::string& name) const;
    // Bytes of all weights the trunk reads (for memory plans and bandwidth floors).
    uint64_t weight_bytes() const;

  private:
    std::shared_ptr<const gguf::File> file_;
    std::vector<Tensor> tensors_;
    friend struct ModelBuilder;
};

std::string arch_name(Arch a);

}  // namespace dl
