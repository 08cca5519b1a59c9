// An independent, deliberately naive forward pass for the chain tests: plain loops in double
// precision over dequantized weights, token by token, the DeltaNet in its step form, no KV
// rounding. It shares nothing with the CPU chain but the model binding, so the two can be held
// against each other.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace dl::test {

// Logits [tokens.size()][n_vocab] of a fresh sequence.
std::vector<std::vector<double>> reference_forward(const Model& m,
                                                   const std::vector<int32_t>& tokens);

}  // namespace dl::test
