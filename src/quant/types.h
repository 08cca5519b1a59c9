// Tensor element types as GGUF files number them, with their block geometry. A row of n elements
// of type t occupies n / block_size(t) * type_size(t) bytes; n must be a multiple of the block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dl {

enum class QType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
};

struct QTypeInfo {
    QType type;
    std::string_view name;  // as llama.cpp prints it: "q4_K", "f16", ...
    int64_t block_size;     // elements per block
    size_t type_size;       // bytes per block
    bool known;  // geometry known (a file may carry it even if we cannot compute with it)
};

// Geometry of a type number read from a file; std::nullopt for a number no GGUF writer uses.
std::optional<QTypeInfo> qtype_info(uint32_t type);
const QTypeInfo& info(QType t);

inline int64_t block_size(QType t) {
    return info(t).block_size;
}
inline size_t type_size(QType t) {
    return info(t).type_size;
}
inline std::string_view qtype_name(QType t) {
    return info(t).name;
}
// Bytes of a row of n elements (n a multiple of the block size).
inline size_t row_size(QType t, int64_t n) {
    return (size_t)(n / block_size(t)) * type_size(t);
}
// Parses "q4_K", "Q4_K", "f16", ... (case-insensitive).
std::optional<QType> parse_qtype(std::string_view name);

// Block-size constants shared by every implementation of the formats.
constexpr int QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32, QK8_1 = 32;
constexpr int QK_K = 256, K_SCALE_SIZE = 12, QK4_NL = 32;

}  // namespace dl
