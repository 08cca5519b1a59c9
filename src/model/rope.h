// The rotary embedding's inverse frequencies, one table for every executor so that all rotate
// by the same angles: base^(-2j / n_rot) for each pair j, divided by llama-3's per-pair
// rope_freqs where the file has them, rounded to float as the reference implementations hold it.
#pragma once

#include <cstdint>
#include <vector>

namespace dl {

class Model;

// inv_freq[j] for j < n_rot / 2; freq_divisor may be null.
void rope_inv_freq(float base, int64_t n_rot, const float* freq_divisor, float* inv_freq);
// The model's table for n_rot rotated dims (its rope_dims, or more for a kernel's padding).
std::vector<float> rope_inv_freq(const Model& model, int64_t n_rot);

}  // namespace dl
