// The filters of the template language: jinja2's built-in ones as chat templates use them, and
// tojson as transformers defines it (json.dumps with ensure_ascii=False, indent, separators,
// sort_keys; no HTML escaping).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "template/builtins.h"

namespace dl::tmpl {
namespace {

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&#34;";
                break;
            case '\'':
                out += "&#39;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

// Python's int(x) for filter |int: numbers truncate, strings parse (with "_" and blanks), else
// the default.
Value to_int(const Value& v, const Value& fallback) {
    if (v.type == Value::Type::Int || v.type == Value::Type::Bool)
        return Value::from_int(v.as_int());
    if (v.type == Value::Type::Float) {
        if (!std::isfinite(v.number)) return fallback;
        return Value::from_int(float_to_int(v.number));
    }
    if (v.is_string()) {
        std::string s;
        for (char c : v.string)
            if (c != '_') s += c;
        if (s.find_first_of("xXpP") != std::string::npos) return fallback;  // no hex, as Python
        try {
            size_t used = 0;
            long long i = std::stoll(s, &used, 10);
            while (used < s.size() && std::isspace((unsigned char)s[used])) ++used;
            if (used == s.size()) return Value::from_int(i);
            double d = std::stod(s, &used);
            while (used < s.size() && std::isspace((unsigned char)s[used])) ++used;
            if (used == s.size() && std::isfinite(d)) return Value::from_int(float_to_int(d));
        } catch (const std::exception&) {
        }
    }
    return fallback;
}

Value to_float(const Value& v, const Value& fallback) {
    if (v.is_number()) return Value::from_float(v.as_double());
    if (v.is_string() && v.string.find_first_of("xXpP") == std::string::npos) {
        try {
            size_t used = 0;
            double d = std::stod(v.string, &used);
            while (used < v.string.size() && std::isspace((unsigned char)v.string[used])) ++used;
            if (used == v.string.size()) return Value::from_float(d);
        } catch (const std::exception&) {
        }
    }
    return fallback;
}

// The attribute path "a.b.0" of map(attribute=...), selectattr and sort.
Value attribute_path(const Value& v, const std::string& path, Environment& env) {
    Value cur = v;
    size_t b = 0;
    while (b <= path.size()) {
        size_t e = path.find('.', b);
        if (e == std::string::npos) e = path.size();
        std::string part = path.substr(b, e - b);
        bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
        if (cur.is_undefined()) return cur;
        cur = digits ? get_item(cur, Value::from_int(std::stoll(part)), env)
                     : get_item(cur, Value::from_string(part), env);
        b = e + 1;
    }
    return cur;
}

// select/reject/selectattr/rejectattr: the test and its arguments start at positional `first`.
Value select(const Value& seq, CallArgs& args, bool by_attribute, bool keep, Environment& env) {
    size_t first = 0;
    std::string attribute;
    if (by_attribute) {
        Value a = argument(args, 0, "attribute");
        if (!a.is_string()) fail("selectattr needs an attribute name");
        attribute = a.string;
        first = 1;
    }
    std::string test;
    CallArgs test_args;
    if (args.positional.size() > first) {
        test = to_str(args.positional[first]);
        test_args.positional.assign(args.positional.begin() + long(first) + 1,
                                    args.positional.end());
    }
    Array out;
    for (const auto& item : iterate(seq)) {
        env.count_iterations(1);
        Value v = by_attribute ? attribute_path(item, attribute, env) : item;
        bool ok = test.empty() ? v.truthy() : env.test(test, v, test_args);
        if (ok == keep) out.push_back(item);
    }
    return Value::from_array(std::move(out));
}

Value sort(const Value& seq, CallArgs& args, Environment& env) {
    bool reverse = argument(args, 0, "reverse", Value::from_bool(false)).truthy();
    bool case_sensitive = argument(args, 1, "case_sensitive", Value::from_bool(false)).truthy();
    Value attribute = argument(args, 2, "attribute");
    Array items = iterate(seq);
    auto key = [&](const Value& v) {
        Value k = attribute.is_string() ? attribute_path(v, attribute.string, env) : v;
        if (k.is_string() && !case_sensitive) {
            std::string s = k.string;
            for (char& c : s) c = char(std::tolower((unsigned char)c));
            return Value::from_string(s);
        }
        return k;
    };
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
        return reverse ? less(key(b), key(a)) : less(key(a), key(b));
    });
    return Value::from_array(std::move(items));
}

// Python's round(x, digits): the decimal nearest to x's exact binary value, ties to even,
// which is what printf's correctly rounded conversion gives.
double python_round(double x, int64_t digits) {
    if (!std::isfinite(x) || digits > 300) return x;
    if (digits < -400) return x * 0.0;  // every digit rounded away
    if (digits < 0) {
        double scale = std::pow(10.0, double(-digits));
        return std::nearbyint(x / scale) * scale;
    }
    char buf[700];  // 309 integer digits, the point and 300 decimals at most
    std::snprintf(buf, sizeof buf, "%.*f", int(digits), x);
    return std::strtod(buf, nullptr);
}

const char* const kFilters[] = {
    "tojson",      "trim",       "length",     "count",   "string", "safe",    "escape",   "e",
    "forceescape", "items",      "join",       "default", "d",      "first",   "last",     "upper",
    "lower",       "capitalize", "title",      "replace", "list",   "reverse", "map",      "select",
    "reject",      "selectattr", "rejectattr", "int",     "float",  "abs",     "round",    "sort",
    "dictsort",    "unique",     "sum",        "min",     "max",    "indent",  "wordcount"};

// The keyword arguments each filter takes, as jinja2 (and transformers' tojson) declare them.
const std::vector<std::string>& keywords_of(const std::string& filter) {
    static const std::vector<std::pair<std::string, std::vector<std::string>>> table = {
        {"tojson", {"ensure_ascii", "indent", "separators", "sort_keys"}},
        {"trim", {"chars"}},
        {"join", {"d", "attribute"}},
        {"default", {"default_value", "boolean"}},
        {"d", {"default_value", "boolean"}},
        {"replace", {"old", "new", "count"}},
        {"map", {"attribute", "default"}},
        {"int", {"default", "base"}},
        {"float", {"default"}},
        {"round", {"precision", "method"}},
        {"sort", {"reverse", "case_sensitive", "attribute"}},
        {"dictsort", {"case_sensitive", "by", "reverse"}},
        {"unique", {"case_sensitive", "attribute"}},
        {"sum", {"attribute", "start"}},
        {"min", {"case_sensitive", "attribute"}},
        {"max", {"case_sensitive", "attribute"}},
        {"indent", {"width", "first", "blank"}},
    };
    static const std::vector<std::string> none;
    for (const auto& [name, keys] : table)
        if (name == filter) return keys;
    return none;
}

}  // namespace

bool is_filter_name(const std::string& name) {
    return std::find(std::begin(kFilters), std::end(kFilters), name) != std::end(kFilters);
}

Value apply_filter(const std::string& name, const Value& v, CallArgs& args, Environment& env) {
    // map('filter', ...) hands its keywords to that filter
    if (name != "map" || argument(args, 99, "attribute").is_string()) {
        const auto& allowed = keywords_of(name);
        for (const auto& [k, v] : args.keyword)
            if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
                fail("filter {} got an unexpected keyword argument '{}'", name, k);
    }
    const size_t cap = env.max_string_bytes();
    auto checked = [&](std::string s) {
        if (s.size() > cap) fail("filter {} builds a string longer than {} bytes", name, cap);
        return Value::from_string(std::move(s));
    };
    if (name == "tojson") {
        JsonOptions o;
        o.ensure_ascii = argument(args, 0, "ensure_ascii", Value::from_bool(false)).truthy();
        Value indent = argument(args, 1, "indent");
        if (indent.is_number()) {
            o.indent = int(std::clamp<int64_t>(indent.as_int(), 0, 64));
            o.item_separator.assign(1, ',');
        } else if (indent.is_string()) {
            fail("tojson: a string indent is not supported");
        }
        Value sep = argument(args, 2, "separators");
        if (sep.is_array() && sep.array->size() == 2) {
            o.item_separator = to_str((*sep.array)[0]);
            o.key_separator = to_str((*sep.array)[1]);
        }
        o.sort_keys = argument(args, 3, "sort_keys", Value::from_bool(false)).truthy();
        return checked(to_json(v, o));
    }
    if (name == "trim") {
        Value r;
        CallArgs a;
        a.positional.push_back(argument(args, 0, "chars"));
        call_method(Value::from_string(to_str(v)), "strip", a, r, env);
        return r;
    }
    if (name == "length" || name == "count") {
        if (v.is_string()) return Value::from_int(int64_t(utf8_length(v.string)));
        if (v.is_array()) return Value::from_int(int64_t(v.array->size()));
        if (v.is_object()) return Value::from_int(int64_t(v.object->size()));
        if (v.is_undefined()) return Value::from_int(0);
        fail("object of type '{}' has no len()", type_name(v));
    }
    if (name == "string") return Value::from_string(to_str(v));
    if (name == "safe") {
        Value s = Value::from_string(to_str(v));
        s.is_safe = true;
        return s;
    }
    if (name == "escape" || name == "e" || name == "forceescape") {
        if (v.is_safe && name != "forceescape") return v;
        Value s = checked(html_escape(to_str(v)));
        s.is_safe = true;
        return s;
    }
    if (name == "items") {
        if (v.is_undefined()) return Value::from_array({});
        if (!v.is_object() || v.is_namespace) fail("can only get item pairs from a mapping");
        Value r;
        CallArgs none;
        call_method(v, "items", none, r, env);
        return r;
    }
    if (name == "join") {
        Value sep = argument(args, 0, "d", Value::from_string(""));
        Value attribute = argument(args, 1, "attribute");
        std::string out;
        bool first = true;
        for (const auto& item : iterate(v)) {
            if (!first) out += to_str(sep);
            first = false;
            out +=
                to_str(attribute.is_string() ? attribute_path(item, attribute.string, env) : item);
            if (out.size() > cap) fail("join builds a string longer than {} bytes", cap);
        }
        return Value::from_string(out);
    }
    if (name == "default" || name == "d") {
        Value fallback = argument(args, 0, "default_value", Value::from_string(""));
        bool boolean = argument(args, 1, "boolean", Value::from_bool(false)).truthy();
        if (v.is_undefined() || (boolean && !v.truthy())) return fallback;
        return v;
    }
    if (name == "first" || name == "last") {
        Array items = iterate(v);
        if (items.empty()) return Value();
        return name == "first" ? items.front() : items.back();
    }
    if (name == "upper" || name == "lower" || name == "capitalize") {
        Value r;
        CallArgs none;
        call_method(Value::from_string(to_str(v)), name, none, r, env);
        return r;
    }
    if (name == "title") {
        // jinja2 capitalizes after spaces, "-" and opening brackets, unlike str.title
        std::u32string u = utf8_decode(to_str(v));
        bool start = true;
        for (char32_t& c : u) {
            c = start ? upper_case(c) : lower_case(c);
            start = c < 0x80 && (std::isspace(int(c)) || c == '-' || c == '(' || c == '{' ||
                                 c == '[' || c == '<');
        }
        return Value::from_string(utf8_encode(u));
    }
    if (name == "replace") {
        Value r;
        call_method(Value::from_string(to_str(v)), "replace", args, r, env);
        return r;
    }
    if (name == "list") return Value::from_array(iterate(v));
    if (name == "reverse") {
        if (v.is_string()) {
            std::u32string u = utf8_decode(v.string);
            std::reverse(u.begin(), u.end());
            return Value::from_string(utf8_encode(u));
        }
        Array items = iterate(v);
        std::reverse(items.begin(), items.end());
        return Value::from_array(std::move(items));
    }
    if (name == "map") {
        Value attribute = argument(args, 99, "attribute");
        Array out;
        if (attribute.is_string()) {
            Value fallback = argument(args, 99, "default");
            for (const auto& item : iterate(v)) {
                env.count_iterations(1);
                Value x = attribute_path(item, attribute.string, env);
                out.push_back(x.is_undefined() && !fallback.is_undefined() ? fallback : x);
            }
        } else {
            if (args.positional.empty()) fail("map needs a filter name or attribute=");
            std::string filter = to_str(args.positional[0]);
            CallArgs rest;
            rest.positional.assign(args.positional.begin() + 1, args.positional.end());
            rest.keyword = args.keyword;
            for (const auto& item : iterate(v)) {
                env.count_iterations(1);
                CallArgs a = rest;
                out.push_back(env.filter(filter, item, a));
            }
        }
        return Value::from_array(std::move(out));
    }
    if (name == "select" || name == "reject") return select(v, args, false, name == "select", env);
    if (name == "selectattr" || name == "rejectattr")
        return select(v, args, true, name == "selectattr", env);
    if (name == "int") return to_int(v, argument(args, 0, "default", Value::from_int(0)));
    if (name == "float") return to_float(v, argument(args, 0, "default", Value::from_float(0)));
    if (name == "abs") {
        if (v.type == Value::Type::Float) return Value::from_float(std::fabs(v.number));
        if (v.type == Value::Type::Int || v.type == Value::Type::Bool) {
            if (v.as_int() == INT64_MIN) fail("integer result of abs is out of range");
            return Value::from_int(std::llabs(v.as_int()));
        }
        fail("bad operand type for abs(): '{}'", type_name(v));
    }
    if (name == "round") {
        int64_t precision = argument(args, 0, "precision", Value::from_int(0)).as_int();
        std::string method = to_str(argument(args, 1, "method", Value::from_string("common")));
        double x = v.as_double();
        double scale = std::pow(10.0, double(precision));
        if (method == "common") {
            if (v.type == Value::Type::Int && precision >= 0) return v;  // round(int) is an int
            return Value::from_float(python_round(x, precision));
        }
        if (method == "ceil") return Value::from_float(std::ceil(x * scale) / scale);
        if (method == "floor") return Value::from_float(std::floor(x * scale) / scale);
        fail("method must be common, ceil or floor");
    }
    if (name == "sort") return sort(v, args, env);
    if (name == "dictsort") {
        if (!v.is_object()) fail("dictsort needs a mapping");
        bool case_sensitive = argument(args, 0, "case_sensitive", Value::from_bool(false)).truthy();
        bool by_value = to_str(argument(args, 1, "by", Value::from_string("key"))) == "value";
        bool reverse = argument(args, 2, "reverse", Value::from_bool(false)).truthy();
        Value items;
        CallArgs none;
        call_method(v, "items", none, items, env);
        Array pairs = *items.array;
        auto key = [&](const Value& pair) {
            Value k = (*pair.array)[by_value ? 1 : 0];
            return k.is_string() && !case_sensitive ? Value::from_string(to_lower(k.string)) : k;
        };
        std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
            return reverse ? less(key(b), key(a)) : less(key(a), key(b));
        });
        return Value::from_array(std::move(pairs));
    }
    if (name == "unique") {
        Array out;
        for (const auto& item : iterate(v)) {
            bool seen = false;
            for (const auto& o : out) seen = seen || equal(o, item);
            if (!seen) out.push_back(item);
        }
        return Value::from_array(std::move(out));
    }
    if (name == "sum") {
        Value attribute = argument(args, 0, "attribute");
        Value total = argument(args, 1, "start", Value::from_int(0));
        for (const auto& item : iterate(v)) {
            Value x = attribute.is_string() ? attribute_path(item, attribute.string, env) : item;
            if (!x.is_number() || !total.is_number()) fail("sum needs numbers");
            bool ints = x.type != Value::Type::Float && total.type != Value::Type::Float;
            int64_t r = 0;
            if (ints && __builtin_add_overflow(total.as_int(), x.as_int(), &r))
                fail("integer result of sum is out of range");
            total =
                ints ? Value::from_int(r) : Value::from_float(total.as_double() + x.as_double());
        }
        return total;
    }
    if (name == "min" || name == "max") {
        Array items = iterate(v);
        if (items.empty()) return Value();
        Value best = items[0];
        for (const auto& x : items)
            if (name == "min" ? less(x, best) : less(best, x)) best = x;
        return best;
    }
    if (name == "indent") {
        Value width = argument(args, 0, "width", Value::from_int(4));
        bool first = argument(args, 1, "first", Value::from_bool(false)).truthy();
        bool blank = argument(args, 2, "blank", Value::from_bool(false)).truthy();
        std::string pad =
            width.is_string()
                ? width.string
                : std::string(size_t(std::clamp<int64_t>(width.as_int(), 0, 256)), ' ');
        std::string s = to_str(v), out;
        size_t b = 0;
        bool first_line = true;
        for (;;) {
            size_t e = s.find('\n', b);
            std::string line = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
            bool is_blank = line.find_first_not_of(" \t\r\f\v") == std::string::npos;
            if ((!first_line || first) && (blank || !is_blank)) out += pad;
            out += line;
            first_line = false;
            if (e == std::string::npos) break;
            out += '\n';
            b = e + 1;
            if (out.size() > cap) fail("indent builds a string longer than {} bytes", cap);
        }
        return checked(out);
    }
    if (name == "wordcount") {
        // jinja2 counts runs of \w; code points past ASCII count as letters unless blank
        int64_t words = 0;
        bool in_word = false;
        for (char32_t c : utf8_decode(to_str(v))) {
            bool word = c < 0x80 ? (std::isalnum(int(c)) || c == '_') : !is_py_space(c);
            words += word && !in_word;
            in_word = word;
        }
        return Value::from_int(words);
    }
    fail("no filter named '{}'", name);
}

}  // namespace dl::tmpl
