// JSON parsing with a nesting bound checked in one linear pass before the parser runs.
#include "core/json_text.h"

#include <algorithm>

#include "core/error.h"

namespace dl {

size_t json_nesting_depth(std::string_view text) {
    size_t depth = 0, deepest = 0;
    bool in_string = false, escaped = false;
    for (char c : text) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

nlohmann::json parse_json(std::string_view text, const std::string& where) {
    if (json_nesting_depth(text) > kMaxJsonDepth)
        fail("{} nests arrays and objects deeper than {} levels", where, kMaxJsonDepth);
    try {
        return nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception& e) {
        fail("{} is not valid JSON ({})", where, e.what());
    }
}

}  // namespace dl
