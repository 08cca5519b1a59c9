#include "core/bytes.h"

#include <fmt/format.h>

namespace dl {

std::string human_bytes(uint64_t n) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double x = (double)n;
    int u = 0;
    while (x >= 1024.0 && u < 4) x /= 1024.0, ++u;
    return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.2f} {}", x, units[u]);
}

}  // namespace dl
