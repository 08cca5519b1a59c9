// Parsing JSON from files deltallm does not control (config.json, tokenizer.json, safetensors
// headers) with a bound on nesting: copying or walking a value nested tens of thousands of levels
// deep recurses once per level and would overflow the stack.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace dl {

// Deeper than any configuration or tokenizer file nests (they use fewer than ten levels).
constexpr size_t kMaxJsonDepth = 256;

// The deepest nesting of arrays and objects in text (brackets inside strings do not count).
size_t json_nesting_depth(std::string_view text);

// Parses text; throws dl::Error naming `where` when it is not JSON or nests deeper than
// kMaxJsonDepth.
nlohmann::json parse_json(std::string_view text, const std::string& where);

}  // namespace dl
