// Escaping control characters for the terminal.
#include "core/printable.h"

#include <fmt/format.h>

namespace dl {

std::string printable(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7f) {
            out += fmt::format("\\x{:02x}", c);
        } else if (c == 0xc2 && i + 1 < s.size() && (unsigned char)s[i + 1] >= 0x80 &&
                   (unsigned char)s[i + 1] <= 0x9f) {
            // A C1 control in UTF-8 (U+009B is a CSI to some terminals).
            out += fmt::format("\\u{:04x}", (unsigned char)s[i + 1]);
            ++i;
        } else {
            out += (char)c;
        }
    }
    return out;
}

}  // namespace dl
