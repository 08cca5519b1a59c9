// A GGUF file being assembled, shared by import, re-quantization and synthesis: metadata plus a
// list of tensors whose float values are produced on demand (so a large model streams through
// one tensor at a time), and the step that picks each tensor's stored type and encodes it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "convert/convert.h"
#include "gguf/gguf.h"

namespace dl::convert {

struct PlannedTensor {
    std::string name;
    std::vector<int64_t> ne;  // GGUF order: ne[0] contiguous
    // Fills n_elements floats in GGUF order (row-major over ne reversed).
    std::function<void(float* dst)> values;
    // Optional: writes the stored bytes of type t directly and returns true (a copy when the type
    // is unchanged, random blocks for synthetic models); false falls back to values + encode.
    std::function<bool(QType t, uint8_t* dst)> bytes;
    int64_t n_elements() const;
};

struct Plan {
    std::string arch;     // general.architecture
    int64_t n_layer = 0;  // trunk blocks (mixes vary types by layer)
    int n_expert = 0;     // experts per layer (mixes treat some MoE tensors apart)
    std::vector<std::pair<std::string, gguf::Value>> kv;
    std::vector<PlannedTensor> tensors;

    void set(const std::string& key, gguf::Value v);
};

// The stored type of one tensor under an output type (plain types keep 1-D tensors and conv taps
// in f32 and fall back to f16 for rows the block size does not divide).
// has_output: the plan holds an output.weight (mixes treat a tied head differently).
QType stored_type(const OutputType& out, const Plan& plan, const PlannedTensor& t, bool has_output);

// float32 -> bytes of type t for n elements (a whole number of rows of ne0), spread over threads.
void encode(QType t, const float* src, int64_t n, int64_t ne0, uint8_t* dst);
// bytes of type t -> float32 (F32, F16, BF16 and whatever quant::dequantize handles).
void decode(QType t, const uint8_t* src, int64_t n, float* dst);

// Adds the plan's metadata and tensors (each encoded at write time) to a writer; general.file_type
// and general.quantization_version are set from out. The plan must outlive the writer's write().
void fill_writer(const Plan& plan, const OutputType& out, gguf::Writer& w);

}  // namespace dl::convert
