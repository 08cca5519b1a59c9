// A reader of just enough of SPIR-V to size a module's Workgroup variables: the SpecId
// decorations, the scalar, vector, matrix, array and struct types, the constants and
// specialization constants (with the integer and boolean operations glslang emits for
// constant expressions of them), and the variables. Everything else is skipped by its word count.
#include "vulkan/spirv_shared.h"

#include <unordered_map>
#include <vector>

namespace dl::vk {

namespace {

// Opcodes and enumerants of the SPIR-V specification used here.
enum Op : uint32_t {
    kDecorate = 71,
    kTypeBool = 20,
    kTypeInt = 21,
    kTypeFloat = 22,
    kTypeVector = 23,
    kTypeMatrix = 24,
    kTypeArray = 28,
    kTypeStruct = 30,
    kTypePointer = 32,
    kConstantTrue = 41,
    kConstantFalse = 42,
    kConstant = 43,
    kSpecConstantTrue = 48,
    kSpecConstantFalse = 49,
    kSpecConstant = 50,
    kSpecConstantOp = 52,
    kVariable = 59,
    // Operations of OpSpecConstantOp.
    kUConvert = 113,
    kSConvert = 114,
    kSNegate = 126,
    kIAdd = 128,
    kISub = 130,
    kIMul = 132,
    kUDiv = 134,
    kSDiv = 135,
    kUMod = 137,
    kSRem = 138,
    kSMod = 139,
    kLogicalEqual = 164,
    kLogicalNotEqual = 165,
    kLogicalOr = 166,
    kLogicalAnd = 167,
    kLogicalNot = 168,
    kSelect = 169,
    kIEqual = 170,
    kINotEqual = 171,
    kUGreaterThan = 172,
    kSGreaterThan = 173,
    kUGreaterThanEqual = 174,
    kSGreaterThanEqual = 175,
    kULessThan = 176,
    kSLessThan = 177,
    kULessThanEqual = 178,
    kSLessThanEqual = 179,
    kShiftRightLogical = 194,
    kShiftRightArithmetic = 195,
    kShiftLeftLogical = 196,
    kBitwiseOr = 197,
    kBitwiseXor = 198,
    kBitwiseAnd = 199,
    kNot = 200,
};
constexpr uint32_t kMagic = 0x07230203;
constexpr uint32_t kSpecIdDecoration = 1;
constexpr uint32_t kWorkgroupStorage = 4;

// An operation of 32-bit integers or booleans (0 / 1) on a, b, c; empty where it is not one of
// those above or divides by zero.
std::optional<uint32_t> evaluate(uint32_t op, const std::vector<uint32_t>& v) {
    auto arg = [&](size_t i) { return i < v.size() ? v[i] : 0u; };
    const uint32_t a = arg(0), b = arg(1);
    const int32_t sa = (int32_t)a, sb = (int32_t)b;
    const size_t need =
        op == kSelect ? 3
        : (op == kUConvert || op == kSConvert || op == kSNegate || op == kNot || op == kLogicalNot)
            ? 1
            : 2;
    if (v.size() < need) return std::nullopt;
    switch (op) {
        case kUConvert:
        case kSConvert:
            return a;
        case kSNegate:
            return (uint32_t)(-(int64_t)sa);
        case kNot:
            return ~a;
        case kLogicalNot:
            return a ? 0u : 1u;
        case kIAdd:
            return a + b;
        case kISub:
            return a - b;
        case kIMul:
            return a * b;
        case kUDiv:
            if (b == 0) return std::nullopt;
            return a / b;
        case kUMod:
            if (b == 0) return std::nullopt;
            return a % b;
        case kSDiv:
        case kSRem:
        case kSMod: {
            if (sb == 0 || (sa == INT32_MIN && sb == -1)) return std::nullopt;
            if (op == kSDiv) return (uint32_t)(sa / sb);
            int32_t r = sa % sb;
            if (op == kSMod && r != 0 && ((r < 0) != (sb < 0))) r += sb;
            return (uint32_t)r;
        }
        case kShiftRightLogical:
            return b < 32 ? a >> b : 0u;
        case kShiftRightArithmetic:
            return (uint32_t)(sa >> (b < 32 ? b : 31));
        case kShiftLeftLogical:
            return b < 32 ? a << b : 0u;
        case kBitwiseOr:
            return a | b;
        case kBitwiseXor:
            return a ^ b;
        case kBitwiseAnd:
            return a & b;
        case kLogicalEqual:
            return (a != 0) == (b != 0) ? 1u : 0u;
        case kLogicalNotEqual:
            return (a != 0) != (b != 0) ? 1u : 0u;
        case kLogicalOr:
            return a || b ? 1u : 0u;
        case kLogicalAnd:
            return a && b ? 1u : 0u;
        case kSelect:
            return a ? b : arg(2);
        case kIEqual:
            return a == b ? 1u : 0u;
        case kINotEqual:
            return a != b ? 1u : 0u;
        case kUGreaterThan:
            return a > b ? 1u : 0u;
        case kSGreaterThan:
            return sa > sb ? 1u : 0u;
        case kUGreaterThanEqual:
            return a >= b ? 1u : 0u;
        case kSGreaterThanEqual:
            return sa >= sb ? 1u : 0u;
        case kULessThan:
            return a < b ? 1u : 0u;
        case kSLessThan:
            return sa < sb ? 1u : 0u;
        case kULessThanEqual:
            return a <= b ? 1u : 0u;
        case kSLessThanEqual:
            return sa <= sb ? 1u : 0u;
        default:
            return std::nullopt;
    }
}

}  // namespace

std::optional<uint64_t> workgroup_bytes(std::span<const uint32_t> words,
                                        std::span<const uint32_t> spec) {
    if (words.size() < 5 || words[0] != kMagic) return std::nullopt;
    std::unordered_map<uint32_t, uint32_t> spec_id;    // result id -> SpecId
    std::unordered_map<uint32_t, uint64_t> type_size;  // type id -> bytes (known sizes only)
    std::unordered_map<uint32_t, uint32_t> pointee;    // pointer type id -> the type it points to
    std::unordered_map<uint32_t, uint32_t> value;      // constant id -> its value (32-bit)
    uint64_t total = 0;
    for (size_t i = 5; i < words.size();) {
        const uint32_t n = words[i] >> 16, op = words[i] & 0xffff;
        if (n == 0 || i + n > words.size()) return std::nullopt;
        const uint32_t* w = &words[i];
        auto known_value = [&](uint32_t id) -> std::optional<uint32_t> {
            auto it = value.find(id);
            if (it == value.end()) return std::nullopt;
            return it->second;
        };
        switch (op) {
            case kDecorate:
                if (n >= 4 && w[2] == kSpecIdDecoration) spec_id[w[1]] = w[3];
                break;
            case kTypeBool:
                if (n >= 2) type_size[w[1]] = 4;
                break;
            case kTypeInt:
            case kTypeFloat:
                if (n >= 3) type_size[w[1]] = w[2] / 8;
                break;
            case kTypeVector:
            case kTypeMatrix:
                if (n >= 4 && type_size.count(w[2])) type_size[w[1]] = type_size[w[2]] * w[3];
                break;
            case kTypeArray:
                if (n >= 4 && type_size.count(w[2]) && value.count(w[3]))
                    type_size[w[1]] = type_size[w[2]] * value[w[3]];
                break;
            case kTypeStruct: {
                uint64_t s = 0;
                bool all = true;
                for (uint32_t m = 2; m < n; ++m) {
                    auto it = type_size.find(w[m]);
                    if (it == type_size.end())
                        all = false;
                    else
                        s += it->second;
                }
                if (n >= 2 && all) type_size[w[1]] = s;
                break;
            }
            case kTypePointer:
                if (n >= 4) pointee[w[1]] = w[3];
                break;
            case kConstantTrue:
            case kConstantFalse:
                if (n >= 3) value[w[2]] = op == kConstantTrue ? 1 : 0;
                break;
            case kConstant:
                if (n >= 4) value[w[2]] = w[3];
                break;
            case kSpecConstantTrue:
            case kSpecConstantFalse:
            case kSpecConstant: {
                if (n < 3 || (op == kSpecConstant && n < 4)) break;
                uint32_t v = op == kSpecConstant ? w[3] : op == kSpecConstantTrue ? 1 : 0;
                auto it = spec_id.find(w[2]);
                if (it != spec_id.end() && it->second < spec.size()) {
                    v = spec[it->second];
                    if (op != kSpecConstant) v = v != 0 ? 1 : 0;
                }
                value[w[2]] = v;
                break;
            }
            case kSpecConstantOp: {
                if (n < 4) break;
                std::vector<uint32_t> args;
                bool all = true;
                for (uint32_t k = 4; k < n; ++k) {
                    auto v = known_value(w[k]);
                    if (!v)
                        all = false;
                    else
                        args.push_back(*v);
                }
                if (!all) break;
                if (auto v = evaluate(w[3], args)) value[w[2]] = *v;
                break;
            }
            case kVariable:
                if (n >= 4 && w[3] == kWorkgroupStorage) {
                    auto p = pointee.find(w[1]);
                    if (p == pointee.end()) return std::nullopt;
                    auto s = type_size.find(p->second);
                    if (s == type_size.end()) return std::nullopt;
                    total += s->second;
                }
                break;
            default:
                break;
        }
        i += n;
    }
    return total;
}

}  // namespace dl::vk
