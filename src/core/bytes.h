// Byte counts for people: "198.92 MiB", "1.73 GiB".
#pragma once

#include <cstdint>
#include <string>

namespace dl {

// n in the largest binary unit (B, KiB, MiB, GiB, TiB) that keeps it at 1 or more, two decimals.
std::string human_bytes(uint64_t n);

}  // namespace dl
