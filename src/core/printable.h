// Text from files (a GGUF's general.name, its architecture, key and tensor names) on its way to a
// terminal: control characters (ESC, BEL, CR, LF, the C1 range) are shown as escapes, so that a
// file cannot move the cursor, retitle the window or forge lines of output.
#pragma once

#include <string>
#include <string_view>

namespace dl {

// s with every control character written as \n, \r, \t or \xNN (C1 characters U+0080-U+009F as
// \u0080-\u009f); everything else, UTF-8 included, as it is.
std::string printable(std::string_view s);

}  // namespace dl
