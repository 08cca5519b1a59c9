// The type table.
#include "quant/types.h"

#include <array>
#include <cctype>
#include <string>

#include "core/error.h"

namespace dl {

namespace {
// clang-format off
constexpr std::array<QTypeInfo, 32> kTypes = {{
    {QType::F32, "f32", 1, 4, true},
    {QType::F16, "f16", 1, 2, true},
    {QType::Q4_0, "q4_0", 32, 18, true},
    {QType::Q4_1, "q4_1", 32, 20, true},
    {QType::Q5_0, "q5_0", 32, 22, true},
    {QType::Q5_1, "q5_1", 32, 24, true},
    {QType::Q8_0, "q8_0", 32, 34, true},
    {QType::Q8_1, "q8_1", 32, 36, true},
    {QType::Q2_K, "q2_K", 256, 84, true},
    {QType::Q3_K, "q3_K", 256, 110, true},
    {QType::Q4_K, "q4_K", 256, 144, true},
    {QType::Q5_K, "q5_K", 256, 176, true},
    {QType::Q6_K, "q6_K", 256, 210, true},
    {QType::Q8_K, "q8_K", 256, 292, true},
    {QType::IQ2_XXS, "iq2_xxs", 256, 66, true},
    {QType::IQ2_XS, "iq2_xs", 256, 74, true},
    {QType::IQ3_XXS, "iq3_xxs", 256, 98, true},
    {QType::IQ1_S, "iq1_s", 256, 50, true},
    {QType::IQ4_NL, "iq4_nl", 32, 18, true},
    {QType::IQ3_S, "iq3_s", 256, 110, true},
    {QType::IQ2_S, "iq2_s", 256, 82, true},
    {QType::IQ4_XS, "iq4_xs", 256, 136, true},
    {QType::I8, "i8", 1, 1, true},
    {QType::I16, "i16", 1, 2, true},
    {QType::I32, "i32", 1, 4, true},
    {QType::I64, "i64", 1, 8, true},
    {QType::F64, "f64", 1, 8, true},
    {QType::IQ1_M, "iq1_m", 256, 56, true},
    {QType::BF16, "bf16", 1, 2, true},
    {QType::TQ1_0, "tq1_0", 256, 54, true},
    {QType::TQ2_0, "tq2_0", 256, 66, true},
    {QType::MXFP4, "mxfp4", 32, 17, true},
}};
// clang-format on
}  // namespace

std::optional<QTypeInfo> qtype_info(uint32_t type) {
    for (const auto& t : kTypes)
        if (static_cast<uint32_t>(t.type) == type) return t;
    return std::nullopt;
}

const QTypeInfo& info(QType t) {
    for (const auto& i : kTypes)
        if (i.type == t) return i;
    fail("unknown tensor type number {}", static_cast<uint32_t>(t));
}

std::optional<QType> parse_qtype(std::string_view name) {
    std::string lower;
    for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const auto& t : kTypes) {
        std::string n;
        for (char c : t.name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (n == lower) return t.type;
    }
    return std::nullopt;
}

}  // namespace dl
