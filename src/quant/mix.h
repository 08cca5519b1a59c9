// Quantization mixes ("file types"): which block format each tensor of a model gets when a whole
// model is quantized to q4_k_m, q6_k, f16, ... The rules are the ones GGUF files in the wild were
// made with (llama.cpp's quantizer, no importance matrix), so a model quantized here has the same
// tensor types and size as a downloaded file of the same mix: 1-D tensors, norms and the small
// SSM tensors stay F32; the output projection (or the token embedding when it doubles as the
// output) gets Q6_K; attn_v-like tensors (attn_v, attn_qkv) and ffn_down get more bits on some
// layers; a row length the format's block does not divide falls back to a compatible format.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "quant/types.h"

namespace dl::quant {

enum class Mix { f32, f16, bf16, q8_0, q4_0, q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k };

// "q4_k_m", "Q4_K_M", ... (case-insensitive); throws dl::Error naming the known mixes otherwise.
Mix parse_mix(std::string_view name);
// The lower-case name ("q4_k_m").
std::string_view mix_name(Mix m);
// Every mix, in the order above.
const std::vector<Mix>& list_mixes();
// The format most tensors of the mix get (Q4_K for q4_k_m, F16 for f16, ...).
QType mix_base_type(Mix m);
// The number GGUF's general.file_type key records for the mix (llama.cpp's LLAMA_FTYPE_*).
uint32_t mix_file_type(Mix m);

// What the rules need to know about one tensor.
struct MixTensor {
    std::string_view arch;        // general.architecture: "qwen35", "llama", ...
    std::string_view name;        // GGUF tensor name: "blk.3.attn_v.weight", "output.weight", ...
    std::span<const int64_t> ne;  // shape, ne[0] the contiguous dimension (row length)
    int n_layer = 0;              // block count of the model
    bool has_output = true;       // false when token_embd.weight doubles as the output projection
    int n_expert = 0;             // experts per MoE layer (0 for a dense model)
};

// The type tensor t is stored as under mix m. The "more bits" rules are indexed by the layer
// number in the name (blk.N.); this equals the quantizer's running count of attn_v-like and
// ffn_down tensors because every block of the supported models has exactly one of each.
// Not modelled: the 70B-Llama-only attn_v bump.
QType mix_tensor_type(Mix m, const MixTensor& t);

}  // namespace dl::quant
