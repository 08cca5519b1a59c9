// The default model, made by the convert module's synthesizer with a fixed seed.
#include "tools/default_model.h"

#include "convert/convert.h"

namespace dl {

namespace {
convert::SynthOptions default_options() {
    convert::SynthOptions o;
    o.arch = "qwen35";
    o.shape = "tiny";
    o.type = "q8_0";
    o.seed = 20260101;
    return o;
}
}  // namespace

std::vector<uint8_t> default_model_image() {
    return convert::synth_to_bytes(default_options());
}

std::string default_model_description() {
    convert::SynthOptions o = default_options();
    return o.arch + " " + o.shape + " (" + o.type + ", random weights, seed " +
           std::to_string(o.seed) + ")";
}

}  // namespace dl
