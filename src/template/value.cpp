// Python's data model for template values: truth, equality, ordering, str/repr and json.dumps.
// A little over 600 lines: each of those is short, and they share the one Value type's cases.
#include "template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace dl::tmpl {

Value Value::none() {
    Value v;
    v.type = Type::None;
    return v;
}
Value Value::from_bool(bool b) {
    Value v;
    v.type = Type::Bool;
    v.boolean = b;
    return v;
}
Value Value::from_int(int64_t i) {
    Value v;
    v.type = Type::Int;
    v.integer = i;
    return v;
}
Value Value::from_float(double d) {
    Value v;
    v.type = Type::Float;
    v.number = d;
    return v;
}
Value Value::from_string(std::string s) {
    Value v;
    v.type = Type::String;
    v.string = std::move(s);
    return v;
}
static int nesting(int child_depth) {
    if (child_depth + 1 > kMaxValueDepth)
        fail("a list or dict nests deeper than the limit of {} levels", kMaxValueDepth);
    return child_depth + 1;
}

Value Value::from_array(Array a, bool tuple) {
    Value v;
    v.type = Type::Array;
    int d = 0;
    for (const auto& e : a) {
        d = std::max(d, e.depth);
        v.holds_namespace = v.holds_namespace || e.is_namespace || e.holds_namespace;
    }
    v.depth = nesting(d);
    v.array = std::make_shared<Array>(std::move(a));
    v.is_tuple = tuple;
    return v;
}
Value Value::from_object(Object o) {
    Value v;
    v.type = Type::Object;
    int d = 0;
    for (const auto& e : o) {
        d = std::max(d, e.second.depth);
        v.holds_namespace = v.holds_namespace || e.second.is_namespace || e.second.holds_namespace;
    }
    v.depth = nesting(d);
    v.object = std::make_shared<Object>(std::move(o));
    return v;
}
Value Value::from_function(Function f) {
    Value v;
    v.type = Type::Function;
    v.function = std::make_shared<Function>(std::move(f));
    return v;
}

static Value from_json_at(const nlohmann::ordered_json& j, int depth);

Value Value::from_json(const nlohmann::ordered_json& j) {
    return from_json_at(j, 0);
}

static Value from_json_at(const nlohmann::ordered_json& j, int depth) {
    if (depth > kMaxValueDepth)
        fail("the context nests deeper than the limit of {} levels", kMaxValueDepth);
    switch (j.type()) {
        case nlohmann::ordered_json::value_t::null:
            return Value::none();
        case nlohmann::ordered_json::value_t::boolean:
            return Value::from_bool(j.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer:
            return Value::from_int(j.get<int64_t>());
        case nlohmann::ordered_json::value_t::number_unsigned: {
            uint64_t u = j.get<uint64_t>();
            if (u > uint64_t(INT64_MAX)) return Value::from_float(double(u));
            return Value::from_int(int64_t(u));
        }
        case nlohmann::ordered_json::value_t::number_float:
            return Value::from_float(j.get<double>());
        case nlohmann::ordered_json::value_t::string:
            return Value::from_string(j.get<std::string>());
        case nlohmann::ordered_json::value_t::array: {
            Array a;
            a.reserve(j.size());
            for (const auto& e : j) a.push_back(from_json_at(e, depth + 1));
            return Value::from_array(std::move(a));
        }
        case nlohmann::ordered_json::value_t::object: {
            Object o;
            o.reserve(j.size());
            for (const auto& [k, e] : j.items()) o.emplace_back(k, from_json_at(e, depth + 1));
            return Value::from_object(std::move(o));
        }
        default:
            return Value();
    }
}

bool Value::truthy() const {
    switch (type) {
        case Type::Undefined:
        case Type::None:
            return false;
        case Type::Bool:
            return boolean;
        case Type::Int:
            return integer != 0;
        case Type::Float:
            return number != 0;
        case Type::String:
            return !string.empty();
        case Type::Array:
            return !array->empty();
        case Type::Object:
            return is_namespace || !object->empty();
        case Type::Function:
            return true;
    }
    return false;
}

double Value::as_double() const {
    if (type == Type::Float) return number;
    if (type == Type::Int) return double(integer);
    if (type == Type::Bool) return boolean ? 1 : 0;
    fail("a number was expected, not {}", type_name(*this));
}

int64_t float_to_int(double d) {
    // Python's ints are unbounded; ours refuse what int64 cannot hold (casting it is undefined)
    if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0))
        fail("{} is out of the integer range", float_repr(d));
    return int64_t(d);
}

int64_t Value::as_int() const {
    if (type == Type::Int) return integer;
    if (type == Type::Bool) return boolean ? 1 : 0;
    if (type == Type::Float) return float_to_int(number);
    fail("an integer was expected, not {}", type_name(*this));
}

const Value* Value::find(std::string_view key) const {
    if (type != Type::Object) return nullptr;
    for (const auto& [k, v] : *object)
        if (k == key) return &v;
    return nullptr;
}
Value* Value::find(std::string_view key) {
    if (type != Type::Object) return nullptr;
    for (auto& [k, v] : *object)
        if (k == key) return &v;
    return nullptr;
}
void Value::set(const std::string& key, Value v) {
    if (Value* e = find(key)) {
        *e = std::move(v);
        return;
    }
    object->emplace_back(key, std::move(v));
}

std::string type_name(const Value& v) {
    switch (v.type) {
        case Value::Type::Undefined:
            return "Undefined";
        case Value::Type::None:
            return "NoneType";
        case Value::Type::Bool:
            return "bool";
        case Value::Type::Int:
            return "int";
        case Value::Type::Float:
            return "float";
        case Value::Type::String:
            return "str";
        case Value::Type::Array:
            return v.is_tuple ? "tuple" : "list";
        case Value::Type::Object:
            return v.is_namespace ? "Namespace" : "dict";
        case Value::Type::Function:
            return "function";
    }
    return "object";
}

std::string float_repr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, r.ptr);
    // sci is like "-1.2345e+05": split into sign, digits and exponent.
    bool negative = sci[0] == '-';
    if (negative) sci.erase(0, 1);
    size_t e = sci.find('e');
    int exponent = std::stoi(sci.substr(e + 1));
    std::string digits;
    for (char c : sci.substr(0, e))
        if (c != '.') digits += c;
    std::string out;
    if (exponent < -4 || exponent >= 16) {
        out = digits.substr(0, 1);
        if (digits.size() > 1) {
            out += '.';
            out.append(digits, 1, std::string::npos);
        }
        char ex[16];
        std::snprintf(ex, sizeof ex, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
        out += ex;
    } else if (exponent < 0) {
        out = "0." + std::string(size_t(-exponent - 1), '0') + digits;
    } else {
        if (digits.size() <= size_t(exponent) + 1) {
            out = digits + std::string(size_t(exponent) + 1 - digits.size(), '0') + ".0";
        } else {
            out =
                digits.substr(0, size_t(exponent) + 1) + "." + digits.substr(size_t(exponent) + 1);
        }
    }
    return negative ? "-" + out : out;
}

static std::string string_repr(const std::string& s) {
    bool has_single = s.find('\'') != std::string::npos;
    bool has_double = s.find('"') != std::string::npos;
    char quote = has_single && !has_double ? '"' : '\'';
    std::string out(1, quote);
    for (unsigned char c : s) {
        if (c == quote || c == '\\') {
            out += '\\';
            out += char(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7f) {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02x", c);
            out += b;
        } else {
            out += char(c);
        }
    }
    return out + quote;
}

std::string to_repr(const Value& v) {
    switch (v.type) {
        case Value::Type::Undefined:
            return "Undefined";
        case Value::Type::String:
            return string_repr(v.string);
        case Value::Type::Array: {
            std::string out = v.is_tuple ? "(" : "[";
            for (size_t i = 0; i < v.array->size(); ++i) {
                if (i) out += ", ";
                out += to_repr((*v.array)[i]);
            }
            if (v.is_tuple && v.array->size() == 1) out += ",";
            return out + (v.is_tuple ? ")" : "]");
        }
        case Value::Type::Object: {
            std::string out = v.is_namespace ? "<Namespace {" : "{";
            bool first = true;
            for (const auto& [k, e] : *v.object) {
                if (!first) out += ", ";
                first = false;
                out += string_repr(k) + ": " + to_repr(e);
            }
            return out + (v.is_namespace ? "}>" : "}");
        }
        default:
            return to_str(v);
    }
}

std::string to_str(const Value& v) {
    switch (v.type) {
        case Value::Type::Undefined:
            return "";
        case Value::Type::None:
            return "None";
        case Value::Type::Bool:
            return v.boolean ? "True" : "False";
        case Value::Type::Int:
            return std::to_string(v.integer);
        case Value::Type::Float:
            return float_repr(v.number);
        case Value::Type::String:
            return v.string;
        case Value::Type::Function:
            return "<function>";
        default:
            return to_repr(v);
    }
}

bool equal(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.type != Value::Type::Float && b.type != Value::Type::Float)
            return a.as_int() == b.as_int();
        return a.as_double() == b.as_double();
    }
    if (a.type != b.type) return false;
    switch (a.type) {
        case Value::Type::Undefined:
        case Value::Type::None:
            return true;
        case Value::Type::String:
            return a.string == b.string;
        case Value::Type::Array:
            if (a.is_tuple != b.is_tuple) return false;  // (1, 2) != [1, 2] in Python
            if (a.array->size() != b.array->size()) return false;
            for (size_t i = 0; i < a.array->size(); ++i)
                if (!equal((*a.array)[i], (*b.array)[i])) return false;
            return true;
        case Value::Type::Object:
            if (a.is_namespace || b.is_namespace) return a.object == b.object;
            if (a.object->size() != b.object->size()) return false;
            for (const auto& [k, e] : *a.object) {
                const Value* o = b.find(k);
                if (!o || !equal(e, *o)) return false;
            }
            return true;
        case Value::Type::Function:
            return a.function == b.function;
        default:
            return false;
    }
}

bool less(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.type != Value::Type::Float && b.type != Value::Type::Float)
            return a.as_int() < b.as_int();
        return a.as_double() < b.as_double();
    }
    if (a.is_string() && b.is_string()) return utf8_decode(a.string) < utf8_decode(b.string);
    if (a.is_array() && b.is_array()) {
        const Array &x = *a.array, &y = *b.array;
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (!equal(x[i], y[i])) return less(x[i], y[i]);
        }
        return x.size() < y.size();
    }
    fail("'<' is not supported between {} and {}", type_name(a), type_name(b));
}

static void json_string(const std::string& s, bool ensure_ascii, std::string& out) {
    auto hex = [&](uint32_t c) {
        char b[16];
        std::snprintf(b, sizeof b, "\\u%04x", unsigned(c & 0xffff));
        out += b;
    };
    auto ascii = [&](unsigned char c) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            default:
                if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
                    hex(c);
                } else {
                    out += char(c);
                }
        }
    };
    out += '"';
    if (!ensure_ascii) {
        for (unsigned char c : s) ascii(c);
    } else {
        for (char32_t c : utf8_decode(s)) {
            if (c < 0x80) {
                ascii((unsigned char)c);
            } else if (c >= 0x10000) {
                uint32_t u = c - 0x10000;
                hex(0xd800 + (u >> 10));
                hex(0xdc00 + (u & 0x3ff));
            } else {
                hex(c);
            }
        }
    }
    out += '"';
}

static void json_value(const Value& v, const JsonOptions& o, int depth, std::string& out) {
    if (depth > 512) fail("tojson: the value is nested too deeply");
    auto newline = [&](int level) {
        if (o.indent < 0) return;
        out += '\n';
        out.append(size_t(o.indent) * size_t(level), ' ');
    };
    switch (v.type) {
        case Value::Type::None:
            out += "null";
            return;
        case Value::Type::Bool:
            out += v.boolean ? "true" : "false";
            return;
        case Value::Type::Int:
            out += std::to_string(v.integer);
            return;
        case Value::Type::Float:
            if (std::isnan(v.number)) {
                out += "NaN";
            } else if (std::isinf(v.number)) {
                out += v.number > 0 ? "Infinity" : "-Infinity";
            } else {
                out += float_repr(v.number);
            }
            return;
        case Value::Type::String:
            json_string(v.string, o.ensure_ascii, out);
            return;
        case Value::Type::Array: {
            if (v.array->empty()) {
                out += "[]";
                return;
            }
            out += '[';
            for (size_t i = 0; i < v.array->size(); ++i) {
                if (i) out += o.item_separator;
                newline(depth + 1);
                json_value((*v.array)[i], o, depth + 1, out);
            }
            newline(depth);
            out += ']';
            return;
        }
        case Value::Type::Object: {
            if (v.is_namespace) fail("Object of type Namespace is not JSON serializable");
            if (v.object->empty()) {
                out += "{}";
                return;
            }
            std::vector<const std::pair<std::string, Value>*> items;
            for (const auto& e : *v.object) items.push_back(&e);
            if (o.sort_keys)
                std::stable_sort(items.begin(), items.end(),
                                 [](auto* a, auto* b) { return a->first < b->first; });
            out += '{';
            for (size_t i = 0; i < items.size(); ++i) {
                if (i) out += o.item_separator;
                newline(depth + 1);
                json_string(items[i]->first, o.ensure_ascii, out);
                out += o.key_separator;
                json_value(items[i]->second, o, depth + 1, out);
            }
            newline(depth);
            out += '}';
            return;
        }
        default:
            fail("Object of type {} is not JSON serializable", type_name(v));
    }
}

std::string to_json(const Value& v, const JsonOptions& options) {
    std::string out;
    json_value(v, options, 0, out);
    return out;
}

std::u32string utf8_decode(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        unsigned char c = s[i];
        int n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
        if (c >= 0x80 && c < 0xc0) n = 1;  // a stray continuation byte stands for itself
        if (i + size_t(n) > s.size()) n = 1;
        char32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
        for (int k = 1; k < n; ++k) cp = (cp << 6) | (char32_t(s[i + size_t(k)]) & 0x3f);
        out += cp;
        i += size_t(n);
    }
    return out;
}

std::string utf8_encode(std::u32string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char32_t c : s) {
        if (c < 0x80) {
            out += char(c);
        } else if (c < 0x800) {
            out += char(0xc0 | (c >> 6));
            out += char(0x80 | (c & 0x3f));
        } else if (c < 0x10000) {
            out += char(0xe0 | (c >> 12));
            out += char(0x80 | ((c >> 6) & 0x3f));
            out += char(0x80 | (c & 0x3f));
        } else {
            out += char(0xf0 | (c >> 18));
            out += char(0x80 | ((c >> 12) & 0x3f));
            out += char(0x80 | ((c >> 6) & 0x3f));
            out += char(0x80 | (c & 0x3f));
        }
    }
    return out;
}

bool is_py_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

size_t utf8_length(std::string_view s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xc0) != 0x80;
    return n;
}

char32_t lower_case(char32_t c) {
    if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
    if ((c >= 0xc0 && c <= 0xde && c != 0xd7) || (c >= 0x391 && c <= 0x3ab && c != 0x3a2) ||
        (c >= 0x410 && c <= 0x42f))
        return c + 32;
    if (c >= 0x400 && c <= 0x40f) return c + 80;
    if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
        c != 0x17f) {
        bool odd_pairs = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
        if (odd_pairs ? (c % 2 == 1) : (c % 2 == 0)) return c + 1;
    }
    return c;
}

char32_t upper_case(char32_t c) {
    if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
    if ((c >= 0xe0 && c <= 0xfe && c != 0xf7) || (c >= 0x3b1 && c <= 0x3cb && c != 0x3c2) ||
        (c >= 0x430 && c <= 0x44f))
        return c - 32;
    if (c == 0x3c2) return 0x3a3;  // final sigma
    if (c == 0xff) return 0x178;
    if (c >= 0x450 && c <= 0x45f) return c - 80;
    if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
        c != 0x17f) {
        bool odd_pairs = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
        if (odd_pairs ? (c % 2 == 0) : (c % 2 == 1)) return c - 1;
    }
    return c;
}

bool is_cased(char32_t c) {
    return c == 0xdf || lower_case(c) != c || upper_case(c) != c;
}

std::string to_lower(std::string_view s) {
    std::u32string u = utf8_decode(s);
    for (char32_t& c : u) c = lower_case(c);
    return utf8_encode(u);
}

std::string to_upper(std::string_view s) {
    std::u32string u = utf8_decode(s), out;
    for (char32_t c : u) {
        if (c == 0xdf) {
            out += U"SS";  // Python's full mapping of sharp s
        } else {
            out += upper_case(c);
        }
    }
    return utf8_encode(out);
}

}  // namespace dl::tmpl
