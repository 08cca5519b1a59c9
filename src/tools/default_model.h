// The model used when none is given: until a real small model ships with the project, a tiny
// Qwen3.5-shaped model with random weights, generated in memory from a fixed seed (so it is the
// same on every machine and needs no download). Its text is gibberish; it exists so that every
// command can be tried, and tested, on a fresh machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dl {

// The GGUF image of the default model (deterministic: the same bytes on every call).
std::vector<uint8_t> default_model_image();
// How the default model is described to the user (architecture, shape, that it is random).
std::string default_model_description();

}  // namespace dl
