// The link between the GGUF producers and the quantization mixes of quant/mix.h: recognising a
// mix by name and asking it which type a planned tensor gets.
#pragma once

#include <optional>
#include <string>

#include "convert/plan.h"

namespace dl::convert {

// The OutputType of a mix name ("q4_k_m", ...), or nullopt when it names no mix.
std::optional<OutputType> find_mix(const std::string& lower_name);
// The type the mix gives tensor t of the plan; has_output: the plan has an output.weight (found
// once by the caller, not per tensor, which made a plan of a million tensors quadratic).
QType mix_type(const OutputType& out, const Plan& plan, const PlannedTensor& t, bool has_output);

}  // namespace dl::convert
