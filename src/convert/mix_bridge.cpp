// Mix lookup for the GGUF producers, delegating the per-tensor rules to quant/mix.h.
#include "convert/mix_bridge.h"

#include "quant/mix.h"

namespace dl::convert {

std::optional<OutputType> find_mix(const std::string& lower_name) {
    for (quant::Mix m : quant::list_mixes())
        if (quant::mix_name(m) == lower_name)
            return OutputType{lower_name, true, quant::mix_base_type(m), quant::mix_file_type(m)};
    return std::nullopt;
}

QType mix_type(const OutputType& out, const Plan& plan, const PlannedTensor& t, bool has_output) {
    quant::MixTensor mt;
    mt.arch = plan.arch;
    mt.name = t.name;
    mt.ne = t.ne;
    mt.n_layer = (int)plan.n_layer;
    mt.n_expert = plan.n_expert;
    mt.has_output = has_output;
    return quant::mix_tensor_type(quant::parse_mix(out.name), mt);
}

}  // namespace dl::convert
