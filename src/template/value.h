// Values of the chat-template language: Python's data model as Jinja templates see it (None,
// bool, int, float, str, list/tuple, dict in insertion order, callables, namespace, undefined),
// with Python's printing (str, repr) and json.dumps as the templates' tojson filter writes it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dl::tmpl {

struct Value;
using Array = std::vector<Value>;
// A dict keeps its keys in insertion order, as Python's does; lookups are linear because chat
// templates hold small dicts (a message, a tool schema).
using Object = std::vector<std::pair<std::string, Value>>;

struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;
};
using Function = std::function<Value(CallArgs&)>;

// Lists and dicts nest at most this deep, so that printing, comparing and freeing a value never
// recurse without bound (a template could otherwise wrap a list in itself in a loop).
inline constexpr int kMaxValueDepth = 256;

struct Value {
    enum class Type { Undefined, None, Bool, Int, Float, String, Array, Object, Function };
    Type type = Type::Undefined;
    bool boolean = false;
    bool is_tuple = false;      // an Array that Python would print as a tuple
    bool is_namespace = false;  // an Object made by namespace(): the one kind `set a.b` may change
    bool is_safe = false;       // a string marked safe (kept only so `escape` leaves it alone)
    // A list, dict or bound method that reaches a namespace: such values may not be stored in a
    // namespace, so namespaces never form cycles or chains deeper than kMaxValueDepth.
    bool holds_namespace = false;
    int depth = 0;  // nesting of lists and dicts: 1 for a list of scalars
    int64_t integer = 0;
    double number = 0;
    std::string string;
    std::shared_ptr<Array> array;
    std::shared_ptr<Object> object;
    std::shared_ptr<Function> function;

    Value() = default;
    static Value none();
    static Value from_bool(bool b);
    static Value from_int(int64_t i);
    static Value from_float(double d);
    static Value from_string(std::string s);
    static Value from_array(Array a, bool tuple = false);
    static Value from_object(Object o);
    static Value from_function(Function f);
    static Value from_json(const nlohmann::ordered_json& j);

    bool is_undefined() const { return type == Type::Undefined; }
    bool is_none() const { return type == Type::None; }
    bool is_string() const { return type == Type::String; }
    bool is_array() const { return type == Type::Array; }
    bool is_object() const { return type == Type::Object; }
    bool is_number() const {
        return type == Type::Int || type == Type::Float || type == Type::Bool;
    }
    bool is_callable() const { return type == Type::Function; }

    // Python's bool(x).
    bool truthy() const;
    // Python's float(x) for numbers (bool counts as an int, as in Python).
    double as_double() const;
    int64_t as_int() const;

    // The dict entry, or nullptr.
    const Value* find(std::string_view key) const;
    Value* find(std::string_view key);
    void set(const std::string& key, Value v);
};

// int(d) for a float: truncates; dl::Error for NaN, infinities and values past int64.
int64_t float_to_int(double d);

// Python's str(x) (undefined prints as nothing, as Jinja's default Undefined does).
std::string to_str(const Value& v);
// Python's repr(x).
std::string to_repr(const Value& v);
// Python's float repr: shortest round trip, 1e+16 and 1e-05 style exponents.
std::string float_repr(double d);
// Python's ==.
bool equal(const Value& a, const Value& b);
// Python's <, or nullopt-like failure reported by throwing dl::Error.
bool less(const Value& a, const Value& b);
// The Python type name used in error messages ("str", "int", "dict", ...).
std::string type_name(const Value& v);

struct JsonOptions {
    int indent = -1;  // <0: none
    bool ensure_ascii = false;
    bool sort_keys = false;
    std::string item_separator = ", ";
    std::string key_separator = ": ";
};
// json.dumps(x, ...) with the given options; dl::Error for values JSON cannot hold.
std::string to_json(const Value& v, const JsonOptions& options);

// UTF-8 helpers: Python indexes strings by code point.
std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
size_t utf8_length(std::string_view s);
// Python's str.isspace() for one code point.
bool is_py_space(char32_t c);

// Python's case mapping for the scripts templates meet in practice (ASCII, Latin-1, Latin
// Extended-A, Greek, Cyrillic); other code points are left as they are.
char32_t lower_case(char32_t c);
char32_t upper_case(char32_t c);
bool is_cased(char32_t c);
std::string to_lower(std::string_view s);
std::string to_upper(std::string_view s);

}  // namespace dl::tmpl
