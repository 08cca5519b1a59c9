// A tiny Qwen3.5-shaped GGUF with random weights, made in memory by the synthesizer, for
// the engine tests that open a model from bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "convert/convert.h"

namespace dl::test {

inline std::vector<uint8_t> tiny_qwen35_image() {
    convert::SynthOptions o;
    o.arch = "qwen35";
    o.shape = "tiny";
    o.type = "q8_0";
    o.seed = 20260101;
    return convert::synth_to_bytes(o);
}

}  // namespace dl::test
