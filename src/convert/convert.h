// Making GGUF files: import of Hugging Face checkpoints (config.json + safetensors +
// tokenizer.json) laid out as llama.cpp's converter lays them out, re-quantization of a GGUF file
// to another type or mix, and synthetic models with random weights in the real shapes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quant/types.h"

namespace dl::convert {

// Output types by name: a plain element type ("f32", "f16", "bf16", "q8_0", "q4_0", ...), which
// every matrix gets while vectors, norms and conv taps stay f32; or a llama.cpp mix ("q4_k_m",
// "q5_k_m", "q6_k", ...), which picks per tensor. Throws dl::Error for an unknown name.
struct OutputType {
    std::string name;         // as given, lower case
    bool is_mix = false;      // a mix decides per tensor
    QType base = QType::F16;  // the element type of a plain type, the base of a mix
    uint32_t file_type = 1;   // general.file_type (llama_ftype numbering)
};
OutputType parse_output_type(const std::string& name);

struct ConvertOptions {
    std::string type = "f16";
    std::string name;  // general.name; default: the folder's name
};

// Reads HF_DIR (config.json, model.safetensors or shards with model.safetensors.index.json,
// tokenizer.json, tokenizer_config.json) and writes a GGUF file for architectures qwen3_5
// (GGUF qwen35), qwen3 and llama. Throws dl::Error with one sentence for missing files, an
// unknown architecture or an unsupported dtype.
void convert_hf(const std::string& hf_dir, const std::string& out_path,
                const ConvertOptions& options = {});
// The same file in memory (tests).
std::vector<uint8_t> convert_hf_to_bytes(const std::string& hf_dir,
                                         const ConvertOptions& options = {});

// Re-encodes every tensor of a GGUF file to the given type or mix, copying the metadata (with
// general.file_type updated). Tensors stream one at a time.
void quantize_gguf(const std::string& in_path, const std::string& out_path,
                   const std::string& type);

// Synthetic models: random weights in the real shapes, written directly as valid blocks of the
// target types (not by quantizing floats), with a synthetic byte-level BPE vocabulary of the real
// size. Values are scaled so that a forward pass stays finite and well conditioned.
struct SynthOptions {
    std::string arch = "qwen35";  // qwen35, qwen35moe, qwen3, qwen3moe, llama
    // qwen35: tiny 0.8b 2b 4b 9b 27b; qwen35moe: tiny 35b-a3b 122b-a10b; qwen3: tiny 0.6b 8b;
    // qwen3moe: tiny 30b-a3b; llama: tiny 1b 8b
    std::string shape = "tiny";
    std::string type = "q4_k_m";
    uint64_t seed = 1;
};
void synth(const SynthOptions& options, const std::string& out_path);
std::vector<uint8_t> synth_to_bytes(const SynthOptions& options);
// The shape names synth() knows for an architecture.
std::vector<std::string> synth_shapes(const std::string& arch);
// The number of weights a synthetic model holds (every tensor's elements), without writing it.
int64_t synth_weight_count(const SynthOptions& options);

}  // namespace dl::convert
