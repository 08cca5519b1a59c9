// The link between the GGUF producers and the quantization mixes of quant/mix.h: recognising a
// mix by name and asking it which type a planned tensor gets.
#pragma once

#include <optional>
#include <string>

#include "convert/plan.h"

namespace dl::convert {

// The OutputType of a mix name ("q4_k_m", ...), or nullopt when it names no mix.
std::optional<OutputType> find_mix(const std::string& lower_name);
// The type the mix gives tensor t of the plan.
QType mix_type(const OutputType& out, const Plan& plan, const PlannedTensor& t);

}  // namespace dl::convert
