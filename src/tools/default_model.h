// The model used when none is given: deltallm-tiny, a 12.6M-parameter Qwen3.5 the project trained
// on public-domain English text (models/README.md says how), linked into the binary so that every
// command works on a fresh machine with no file and no download.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dl {

// The GGUF image of the built-in model.
std::vector<uint8_t> default_model_image();
// How the built-in model is described to the user (name, size, what it was trained on).
std::string default_model_description();

}  // namespace dl
