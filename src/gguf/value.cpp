// GGUF metadata values: constructors, typed access and a short rendering for listings.
#include <cmath>
#include <limits>

#include "core/error.h"
#include "gguf/gguf.h"

namespace dl::gguf {

std::string_view value_type_name(ValueType t) {
    switch (t) {
        case ValueType::UINT8:
            return "uint8";
        case ValueType::INT8:
            return "int8";
        case ValueType::UINT16:
            return "uint16";
        case ValueType::INT16:
            return "int16";
        case ValueType::UINT32:
            return "uint32";
        case ValueType::INT32:
            return "int32";
        case ValueType::FLOAT32:
            return "float32";
        case ValueType::BOOL:
            return "bool";
        case ValueType::STRING:
            return "string";
        case ValueType::ARRAY:
            return "array";
        case ValueType::UINT64:
            return "uint64";
        case ValueType::INT64:
            return "int64";
        case ValueType::FLOAT64:
            return "float64";
    }
    return "unknown";
}

bool is_integer_type(ValueType t) {
    switch (t) {
        case ValueType::UINT8:
        case ValueType::INT8:
        case ValueType::UINT16:
        case ValueType::INT16:
        case ValueType::UINT32:
        case ValueType::INT32:
        case ValueType::UINT64:
        case ValueType::INT64:
            return true;
        default:
            return false;
    }
}

namespace {

// The type as a user reads it in an error: "string", "array of uint32".
std::string type_phrase(const Value& v) {
    if (v.type == ValueType::ARRAY) {
        if (auto* a = std::get_if<std::shared_ptr<Array>>(&v.v); a && *a)
            return fmt::format("array of {}", value_type_name((*a)->elem_type));
    }
    return std::string(value_type_name(v.type));
}

[[noreturn]] void wrong_type(const Value& v, std::string_view wanted) {
    fail("the value is a {}, not {}", type_phrase(v), wanted);
}

}  // namespace

Value Value::u32(uint32_t x) {
    return Value{ValueType::UINT32, uint64_t{x}};
}
Value Value::i32(int32_t x) {
    return Value{ValueType::INT32, int64_t{x}};
}
Value Value::u64(uint64_t x) {
    return Value{ValueType::UINT64, x};
}
Value Value::f32(float x) {
    return Value{ValueType::FLOAT32, double{x}};
}
Value Value::boolean(bool x) {
    return Value{ValueType::BOOL, x};
}
Value Value::str(std::string s) {
    return Value{ValueType::STRING, std::move(s)};
}

Value Value::array_of_strings(std::vector<std::string> xs) {
    auto a = std::make_shared<Array>();
    a->elem_type = ValueType::STRING;
    a->strings = std::move(xs);
    return Value{ValueType::ARRAY, std::move(a)};
}

Value Value::array_of_i32(std::vector<int32_t> xs) {
    auto a = std::make_shared<Array>();
    a->elem_type = ValueType::INT32;
    a->ints = std::move(xs);
    return Value{ValueType::ARRAY, std::move(a)};
}

Value Value::array_of_f32(std::vector<float> xs) {
    auto a = std::make_shared<Array>();
    a->elem_type = ValueType::FLOAT32;
    a->floats = std::move(xs);
    return Value{ValueType::ARRAY, std::move(a)};
}

bool Value::is_integer() const {
    return is_integer_type(type);
}

int64_t Value::as_int() const {
    if (!is_integer()) wrong_type(*this, "an integer");
    if (auto* u = std::get_if<uint64_t>(&v)) {
        if (*u > (uint64_t)std::numeric_limits<int64_t>::max())
            fail("the value {} does not fit a signed 64-bit integer", *u);
        return (int64_t)*u;
    }
    if (auto* i = std::get_if<int64_t>(&v)) return *i;
    wrong_type(*this, "an integer");
}

uint64_t Value::as_uint() const {
    if (!is_integer()) wrong_type(*this, "an integer");
    if (auto* u = std::get_if<uint64_t>(&v)) return *u;
    if (auto* i = std::get_if<int64_t>(&v)) {
        if (*i < 0) fail("the value {} is negative where an unsigned integer is expected", *i);
        return (uint64_t)*i;
    }
    wrong_type(*this, "an integer");
}

double Value::as_float() const {
    // Integers convert: a writer may well store 10000 for a float hyperparameter.
    if (is_integer()) {
        if (auto* u = std::get_if<uint64_t>(&v)) return (double)*u;
        if (auto* i = std::get_if<int64_t>(&v)) return (double)*i;
    }
    if (type != ValueType::FLOAT32 && type != ValueType::FLOAT64) wrong_type(*this, "a number");
    if (auto* d = std::get_if<double>(&v)) return *d;
    wrong_type(*this, "a number");
}

bool Value::as_bool() const {
    if (type == ValueType::BOOL)
        if (auto* b = std::get_if<bool>(&v)) return *b;
    wrong_type(*this, "a bool");
}

const std::string& Value::as_string() const {
    if (type == ValueType::STRING)
        if (auto* s = std::get_if<std::string>(&v)) return *s;
    wrong_type(*this, "a string");
}

const Array& Value::as_array() const {
    if (type == ValueType::ARRAY)
        if (auto* a = std::get_if<std::shared_ptr<Array>>(&v); a && *a) return **a;
    wrong_type(*this, "an array");
}

size_t Array::size() const {
    if (!items.empty()) return items.size();
    switch (elem_type) {
        case ValueType::STRING:
            return strings.size();
        case ValueType::FLOAT32:
            return floats.size();
        case ValueType::UINT8:
        case ValueType::INT8:
        case ValueType::UINT16:
        case ValueType::INT16:
        case ValueType::UINT32:
        case ValueType::INT32:
            return ints.size();
        default:
            return 0;
    }
}

int64_t Array::int_at(size_t i) const {
    if (i >= size()) fail("array index {} is out of range (the array has {} elements)", i, size());
    if (!items.empty()) return items[i].as_int();
    if (!is_integer_type(elem_type))
        fail("the array holds {}, not integers", value_type_name(elem_type));
    return ints[i];
}

double Array::float_at(size_t i) const {
    if (i >= size()) fail("array index {} is out of range (the array has {} elements)", i, size());
    if (!items.empty()) return items[i].as_float();
    if (elem_type == ValueType::FLOAT32) return floats[i];
    if (is_integer_type(elem_type)) return ints[i];
    fail("the array holds {}, not numbers", value_type_name(elem_type));
}

const std::string& Array::string_at(size_t i) const {
    if (i >= size()) fail("array index {} is out of range (the array has {} elements)", i, size());
    if (!items.empty()) return items[i].as_string();
    if (elem_type != ValueType::STRING)
        fail("the array holds {}, not strings", value_type_name(elem_type));
    return strings[i];
}

namespace {

std::string quote(const std::string& s, size_t max_chars) {
    std::string out = "\"";
    size_t n = 0;
    for (unsigned char c : s) {
        if (n++ == max_chars) {
            out += "...";
            break;
        }
        if (c == '"' || c == '\\') {
            out += '\\';
            out += (char)c;
        } else if (c < 0x20 || c == 0x7f) {
            out += fmt::format("\\x{:02x}", c);
        } else {
            out += (char)c;
        }
    }
    return out + "\"";
}

std::string format_scalar(const Value& v) {
    if (auto* b = std::get_if<bool>(&v.v)) return *b ? "true" : "false";
    if (auto* u = std::get_if<uint64_t>(&v.v)) return std::to_string(*u);
    if (auto* i = std::get_if<int64_t>(&v.v)) return std::to_string(*i);
    if (auto* d = std::get_if<double>(&v.v)) return fmt::format("{}", *d);
    if (auto* s = std::get_if<std::string>(&v.v)) return quote(*s, 200);
    return "?";
}

}  // namespace

std::string format_value(const Value& v, size_t max_items) {
    if (v.type != ValueType::ARRAY) return format_scalar(v);
    auto* ap = std::get_if<std::shared_ptr<Array>>(&v.v);
    if (!ap || !*ap) return "[]";
    const Array& a = **ap;
    size_t n = a.size();
    std::string out = "[";
    for (size_t i = 0; i < n && i < max_items; ++i) {
        if (i) out += ", ";
        if (!a.items.empty())
            out += format_value(a.items[i], max_items);
        else if (a.elem_type == ValueType::STRING)
            out += quote(a.strings[i], 40);
        else if (a.elem_type == ValueType::FLOAT32)
            out += fmt::format("{}", a.floats[i]);
        else
            out += std::to_string(a.ints[i]);
    }
    if (n > max_items) out += fmt::format(", ... {} items", n);
    return out + "]";
}

}  // namespace dl::gguf
