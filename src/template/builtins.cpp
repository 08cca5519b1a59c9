// Attribute and item access, slicing, iteration, the str/dict methods and the tests of the
// template language, with Python's and jinja2's semantics (see builtins.h).
#include "template/builtins.h"

#include <algorithm>
#include <optional>

#include "core/error.h"

namespace dl::tmpl {

Value argument(CallArgs& args, size_t index, const char* name, Value fallback) {
    for (auto& [k, v] : args.keyword)
        if (k == name) return v;
    if (index < args.positional.size()) return args.positional[index];
    return fallback;
}

Array iterate(const Value& v) {
    switch (v.type) {
        case Value::Type::Undefined:
            return {};
        case Value::Type::Array:
            return *v.array;
        case Value::Type::Object: {
            if (v.is_namespace) fail("'Namespace' object is not iterable");
            Array keys;
            for (const auto& [k, e] : *v.object) keys.push_back(Value::from_string(k));
            return keys;
        }
        case Value::Type::String: {
            Array chars;
            for (char32_t c : utf8_decode(v.string))
                chars.push_back(Value::from_string(utf8_encode(std::u32string(1, c))));
            return chars;
        }
        default:
            fail("'{}' object is not iterable", type_name(v));
    }
}

namespace {

const char* const kStringMethods[] = {
    "startswith", "endswith", "split",   "rsplit",  "strip",   "lstrip",
    "rstrip",     "upper",    "lower",   "replace", "format",  "title",
    "capitalize", "find",     "rfind",   "count",   "join",    "isdigit",
    "isalpha",    "isalnum",  "isspace", "islower", "isupper", "splitlines"};
const char* const kDictMethods[] = {"items", "keys", "values", "get"};

// ASCII ends stripped byte by byte: the usual case (a message's |trim) without decoding the whole
// text; nullopt where a non-ASCII character is reached, which the general path decides.
std::optional<std::string> strip_ascii(const std::string& s, const Value& chars, bool left,
                                       bool right) {
    const bool whitespace = chars.is_none() || chars.is_undefined();
    if (!whitespace && (!chars.is_string() || std::any_of(chars.string.begin(), chars.string.end(),
                                                          [](char c) { return c & 0x80; })))
        return std::nullopt;
    auto drop = [&](unsigned char c) {
        return whitespace ? is_py_space(c) : chars.string.find(char(c)) != std::string::npos;
    };
    size_t b = 0, e = s.size();
    if (left)
        while (b < e && !(s[b] & 0x80) && drop(s[b])) ++b;
    if (right)
        while (e > b && !(s[e - 1] & 0x80) && drop(s[e - 1])) --e;
    // A whitespace strip stopped by a non-ASCII byte may face a Unicode space; a given ASCII set
    // holds no non-ASCII character.
    if (whitespace && ((left && b < e && (s[b] & 0x80)) || (right && e > b && (s[e - 1] & 0x80))))
        return std::nullopt;
    return s.substr(b, e - b);
}

std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
    if (std::optional<std::string> fast = strip_ascii(s, chars, left, right)) return *fast;
    std::u32string u = utf8_decode(s);
    std::u32string set;
    bool whitespace = chars.is_none() || chars.is_undefined();
    if (!whitespace) {
        if (!chars.is_string()) fail("strip arg must be None or str");
        set = utf8_decode(chars.string);
    }
    auto drop = [&](char32_t c) {
        return whitespace ? is_py_space(c) : set.find(c) != std::u32string::npos;
    };
    size_t b = 0, e = u.size();
    if (left)
        while (b < e && drop(u[b])) ++b;
    if (right)
        while (e > b && drop(u[e - 1])) --e;
    return utf8_encode(u.substr(b, e - b));
}

Value split(const std::string& s, const Value& sep, int64_t maxsplit, bool from_right) {
    Array parts;
    if (sep.is_none() || sep.is_undefined()) {
        std::u32string u = utf8_decode(s);
        std::vector<std::pair<size_t, size_t>> words;
        size_t i = 0;
        while (i < u.size()) {
            while (i < u.size() && is_py_space(u[i])) ++i;
            if (i >= u.size()) break;
            size_t j = i;
            while (j < u.size() && !is_py_space(u[j])) ++j;
            words.emplace_back(i, j);
            i = j;
        }
        if (maxsplit >= 0 && int64_t(words.size()) > maxsplit + 1) {
            // the remainder keeps the whitespace on its far side, as Python's does
            if (!from_right) {
                words[size_t(maxsplit)].second = u.size();
                words.resize(size_t(maxsplit) + 1);
            } else {
                size_t keep = words.size() - size_t(maxsplit) - 1;
                words.erase(words.begin(), words.begin() + long(keep));
                words[0].first = 0;
            }
        }
        for (auto [b, e] : words)
            parts.push_back(Value::from_string(utf8_encode(u.substr(b, e - b))));
        return Value::from_array(std::move(parts));
    }
    if (!sep.is_string()) fail("must be str or None, not {}", type_name(sep));
    const std::string& d = sep.string;
    if (d.empty()) fail("empty separator");
    std::vector<std::string> out;
    if (!from_right) {
        size_t pos = 0;
        for (;;) {
            size_t f = s.find(d, pos);
            if (f == std::string::npos || (maxsplit >= 0 && int64_t(out.size()) >= maxsplit)) {
                out.push_back(s.substr(pos));
                break;
            }
            out.push_back(s.substr(pos, f - pos));
            pos = f + d.size();
        }
    } else {
        size_t end = s.size();
        for (;;) {
            size_t f = end >= d.size() ? s.rfind(d, end - d.size()) : std::string::npos;
            if (f == std::string::npos || (maxsplit >= 0 && int64_t(out.size()) >= maxsplit)) {
                out.push_back(s.substr(0, end));
                break;
            }
            out.push_back(s.substr(f + d.size(), end - f - d.size()));
            end = f;
        }
        std::reverse(out.begin(), out.end());
    }
    for (auto& p : out) parts.push_back(Value::from_string(std::move(p)));
    return Value::from_array(std::move(parts));
}

std::string replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count, size_t cap) {
    std::string out;
    if (from.empty()) {
        std::u32string u = utf8_decode(s);
        int64_t n = 0;
        for (size_t i = 0; i <= u.size(); ++i) {
            if (count < 0 || n < count) {
                out += to;
                ++n;
            }
            if (i < u.size()) out += utf8_encode(u.substr(i, 1));
            if (out.size() > cap) fail("replace builds a string longer than {} bytes", cap);
        }
        return out;
    }
    size_t pos = 0;
    int64_t n = 0;
    for (;;) {
        size_t f = s.find(from, pos);
        if (f == std::string::npos || (count >= 0 && n >= count)) break;
        out.append(s, pos, f - pos);
        out += to;
        if (out.size() > cap) fail("replace builds a string longer than {} bytes", cap);
        pos = f + from.size();
        ++n;
    }
    out.append(s, pos, std::string::npos);
    return out;
}

// str.format with "{}", "{0}" and "{name}" fields (no format specs).
std::string format(const std::string& f, CallArgs& args) {
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < f.size(); ++i) {
        char c = f[i];
        if (c == '}' && i + 1 < f.size() && f[i + 1] == '}') {
            out += '}';
            ++i;
        } else if (c == '{' && i + 1 < f.size() && f[i + 1] == '{') {
            out += '{';
            ++i;
        } else if (c == '{') {
            size_t e = f.find('}', i);
            if (e == std::string::npos) fail("Single '{{' encountered in format string");
            std::string field = f.substr(i + 1, e - i - 1);
            if (field.find_first_of(":!.[") != std::string::npos)
                fail("format specs in str.format are not supported");
            if (field.empty()) {
                if (auto_index >= args.positional.size())
                    fail("Replacement index {} out of range", auto_index);
                out += to_str(args.positional[auto_index++]);
            } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
                size_t k = std::stoul(field);
                if (k >= args.positional.size()) fail("Replacement index {} out of range", k);
                out += to_str(args.positional[k]);
            } else {
                bool found = false;
                for (auto& [name, v] : args.keyword)
                    if (name == field) {
                        out += to_str(v);
                        found = true;
                        break;
                    }
                if (!found) fail("'{}'", field);
            }
            i = e;
        } else if (c == '}') {
            fail("Single '}}' encountered in format string");
        } else {
            out += c;
        }
    }
    return out;
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
    auto one = [&](const Value& a) {
        if (!a.is_string()) fail("startswith/endswith take a str or a tuple of str");
        const std::string& p = a.string;
        if (p.size() > s.size()) return false;
        return prefix ? s.compare(0, p.size(), p) == 0
                      : s.compare(s.size() - p.size(), p.size(), p) == 0;
    };
    if (affix.is_array()) {
        for (const auto& a : *affix.array)
            if (one(a)) return true;
        return false;
    }
    return one(affix);
}

bool string_method(const std::string& s, const std::string& name, CallArgs& args, Value& r,
                   Environment& env) {
    auto str_arg = [&](size_t i, const char* key) {
        Value v = argument(args, i, key);
        if (!v.is_string()) fail("str.{}() needs a string argument", name);
        return v.string;
    };
    auto int_arg = [&](size_t i, const char* key, int64_t fallback) {
        Value v = argument(args, i, key);
        return v.is_undefined() || v.is_none() ? fallback : v.as_int();
    };
    if (name == "startswith" || name == "endswith") {
        r = Value::from_bool(affix_match(s, argument(args, 0, "prefix"), name == "startswith"));
    } else if (name == "split" || name == "rsplit") {
        r = split(s, argument(args, 0, "sep"), int_arg(1, "maxsplit", -1), name == "rsplit");
    } else if (name == "strip" || name == "lstrip" || name == "rstrip") {
        r = Value::from_string(
            strip(s, argument(args, 0, "chars"), name != "rstrip", name != "lstrip"));
    } else if (name == "upper" || name == "lower") {
        r = Value::from_string(name == "upper" ? to_upper(s) : to_lower(s));
    } else if (name == "replace") {
        r = Value::from_string(replace(s, str_arg(0, "old"), str_arg(1, "new"),
                                       int_arg(2, "count", -1), env.max_string_bytes()));
    } else if (name == "format") {
        r = Value::from_string(format(s, args));
    } else if (name == "title" || name == "capitalize") {
        std::u32string u = utf8_decode(s);
        bool previous_cased = false;
        for (size_t i = 0; i < u.size(); ++i) {
            bool upper = name == "capitalize" ? i == 0 : !previous_cased;
            previous_cased = is_cased(u[i]);
            u[i] = upper ? upper_case(u[i]) : lower_case(u[i]);
        }
        r = Value::from_string(utf8_encode(u));
    } else if (name == "find" || name == "rfind") {
        std::string sub = str_arg(0, "sub");
        size_t f = name == "find" ? s.find(sub) : s.rfind(sub);
        r = Value::from_int(f == std::string::npos ? -1 : int64_t(utf8_length(s.substr(0, f))));
    } else if (name == "count") {
        std::string sub = str_arg(0, "sub");
        int64_t n = 0;
        if (sub.empty()) {
            n = int64_t(utf8_length(s)) + 1;
        } else {
            for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size()))
                ++n;
        }
        r = Value::from_int(n);
    } else if (name == "join") {
        std::string out;
        bool first = true;
        for (const auto& item : iterate(argument(args, 0, "iterable"))) {
            if (!item.is_string())
                fail("sequence item: expected str instance, {} found", type_name(item));
            if (!first) out += s;
            first = false;
            out += item.string;
            if (out.size() > env.max_string_bytes()) fail("join builds a string that is too long");
        }
        r = Value::from_string(out);
    } else if (name == "splitlines") {
        Array lines;
        size_t b = 0;
        for (size_t i = 0; i < s.size(); ++i) {
            if (s[i] == '\n' || s[i] == '\r') {
                lines.push_back(Value::from_string(s.substr(b, i - b)));
                if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
                b = i + 1;
            }
        }
        if (b < s.size()) lines.push_back(Value::from_string(s.substr(b)));
        r = Value::from_array(std::move(lines));
    } else if (name.rfind("is", 0) == 0) {
        std::u32string u = utf8_decode(s);
        bool ok = !u.empty();
        bool cased = false;
        for (char32_t c : u) {
            bool ascii = c < 0x80;
            if (name == "isdigit") ok = ok && ascii && std::isdigit(int(c));
            if (name == "isalpha") ok = ok && ascii && std::isalpha(int(c));
            if (name == "isalnum") ok = ok && ascii && std::isalnum(int(c));
            if (name == "isspace") ok = ok && is_py_space(c);
            if (name == "islower") ok = ok && !(ascii && std::isupper(int(c)));
            if (name == "isupper") ok = ok && !(ascii && std::islower(int(c)));
            cased = cased || (ascii && std::isalpha(int(c)));
        }
        if (name == "islower" || name == "isupper") ok = ok && cased;
        r = Value::from_bool(ok);
    } else {
        return false;
    }
    return true;
}

bool dict_method(const Value& self, const std::string& name, CallArgs& args, Value& r) {
    if (name == "items") {
        Array items;
        for (const auto& [k, v] : *self.object)
            items.push_back(Value::from_array({Value::from_string(k), v}, true));
        r = Value::from_array(std::move(items));
    } else if (name == "keys" || name == "values") {
        Array out;
        for (const auto& [k, v] : *self.object)
            out.push_back(name == "keys" ? Value::from_string(k) : v);
        r = Value::from_array(std::move(out));
    } else if (name == "get") {
        Value key = argument(args, 0, "key");
        const Value* v = key.is_string() ? self.find(key.string) : nullptr;
        r = v ? *v : argument(args, 1, "default", Value::none());
    } else {
        return false;
    }
    return true;
}

}  // namespace

bool has_method(const Value& self, const std::string& name) {
    if (self.is_string())
        return std::find(std::begin(kStringMethods), std::end(kStringMethods), name) !=
               std::end(kStringMethods);
    if (self.is_object() && !self.is_namespace)
        return std::find(std::begin(kDictMethods), std::end(kDictMethods), name) !=
               std::end(kDictMethods);
    return false;
}

bool call_method(const Value& self, const std::string& name, CallArgs& args, Value& result,
                 Environment& env) {
    if (!has_method(self, name)) return false;
    if (self.is_string()) return string_method(self.string, name, args, result, env);
    return dict_method(self, name, args, result);
}

Value get_attribute(const Value& object, const std::string& name, Environment& env) {
    if (has_method(object, name)) {
        Value self = object;
        Environment* e = &env;
        Value method = Value::from_function([self, name, e](CallArgs& args) -> Value {
            Value r;
            call_method(self, name, args, r, *e);
            return r;
        });
        method.holds_namespace = self.holds_namespace;
        return method;
    }
    if (object.is_object()) {
        if (const Value* v = object.find(name)) return *v;
    }
    return Value();
}

Value get_item(const Value& object, const Value& key, Environment& env) {
    if (key.is_string()) {
        if (object.is_object() && !object.is_namespace) {
            if (const Value* v = object.find(key.string)) return *v;
        }
        return get_attribute(object, key.string, env);
    }
    if ((key.type == Value::Type::Int || key.type == Value::Type::Bool) &&
        (object.is_array() || object.is_string())) {
        int64_t i = key.as_int();
        if (object.is_array()) {
            int64_t n = int64_t(object.array->size());
            if (i < 0) i += n;
            if (i < 0 || i >= n) return Value();
            return (*object.array)[size_t(i)];
        }
        std::u32string u = utf8_decode(object.string);
        int64_t n = int64_t(u.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value();
        return Value::from_string(utf8_encode(u.substr(size_t(i), 1)));
    }
    return Value();
}

Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
    auto bound = [](const Value& v) -> std::optional<int64_t> {
        if (v.is_none()) return std::nullopt;
        if (v.type != Value::Type::Int && v.type != Value::Type::Bool)
            fail("slice indices must be integers or None");
        return v.as_int();
    };
    int64_t st = bound(step).value_or(1);
    if (st == 0) fail("slice step cannot be zero");
    std::u32string u;
    int64_t n;
    if (object.is_array()) {
        n = int64_t(object.array->size());
    } else if (object.is_string()) {
        u = utf8_decode(object.string);
        n = int64_t(u.size());
    } else {
        fail("'{}' object is not subscriptable", type_name(object));
    }
    // Python's slice.indices
    auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
        if (!v) return fallback;
        int64_t x = *v;
        if (x < 0) {
            x += n;
            if (x < 0) x = st < 0 ? -1 : 0;
        } else if (x >= n) {
            x = st < 0 ? n - 1 : n;
        }
        return x;
    };
    int64_t b = clamp(bound(start), st < 0 ? n - 1 : 0);
    int64_t e = clamp(bound(stop), st < 0 ? -1 : n);
    Array items;
    std::u32string chars;
    for (int64_t i = b; st > 0 ? i < e : i > e;) {
        if (object.is_array()) {
            items.push_back((*object.array)[size_t(i)]);
        } else {
            chars += u[size_t(i)];
        }
        if (__builtin_add_overflow(i, st, &i)) break;
    }
    if (object.is_string()) return Value::from_string(utf8_encode(chars));
    return Value::from_array(std::move(items), object.is_tuple);
}

namespace {
const char* const kTestsWithoutArguments[] = {
    "defined",  "undefined", "none",    "string", "mapping", "iterable",
    "sequence", "number",    "integer", "float",  "boolean", "true",
    "false",    "callable",  "odd",     "even",   "lower",   "upper"};
const char* const kTestsWithArgument[] = {
    "equalto", "eq",          "==", "sameas", "ne", "!=", "lt", "lessthan", "<",
    "gt",      "greaterthan", ">",  "le",     "<=", "ge", ">=", "in",       "divisibleby"};
}  // namespace

bool is_test_name(const std::string& name) {
    return std::find(std::begin(kTestsWithoutArguments), std::end(kTestsWithoutArguments), name) !=
               std::end(kTestsWithoutArguments) ||
           std::find(std::begin(kTestsWithArgument), std::end(kTestsWithArgument), name) !=
               std::end(kTestsWithArgument);
}

bool apply_test(const std::string& name, const Value& v, CallArgs& args, Environment& env) {
    if (!args.positional.empty() || !args.keyword.empty()) {
        if (std::find(std::begin(kTestsWithoutArguments), std::end(kTestsWithoutArguments), name) !=
            std::end(kTestsWithoutArguments))
            fail("test '{}' takes no arguments", name);
    }
    auto other = [&] { return argument(args, 0, "value"); };
    using T = Value::Type;
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "string") return v.is_string();
    if (name == "mapping") return v.is_object() && !v.is_namespace;
    if (name == "iterable" || name == "sequence")
        return v.is_undefined() || v.is_array() || v.is_string() ||
               (v.is_object() && !v.is_namespace);
    if (name == "number") return v.is_number();
    if (name == "integer") return v.type == T::Int;
    if (name == "float") return v.type == T::Float;
    if (name == "boolean") return v.type == T::Bool;
    if (name == "true") return v.type == T::Bool && v.boolean;
    if (name == "false") return v.type == T::Bool && !v.boolean;
    if (name == "callable") return v.is_callable();
    if (name == "equalto" || name == "eq" || name == "==" || name == "sameas")
        return equal(v, other()) && (name != "sameas" || v.type == other().type);
    if (name == "ne" || name == "!=") return !equal(v, other());
    if (name == "lt" || name == "lessthan" || name == "<") return less(v, other());
    if (name == "gt" || name == "greaterthan" || name == ">") return less(other(), v);
    if (name == "le" || name == "<=") return less(v, other()) || equal(v, other());
    if (name == "ge" || name == ">=") return less(other(), v) || equal(v, other());
    if (name == "in") {
        Value seq = argument(args, 0, "seq");
        if (seq.is_string()) return v.is_string() && seq.string.find(v.string) != std::string::npos;
        if (seq.is_object()) return v.is_string() && seq.find(v.string);
        for (const auto& x : iterate(seq))
            if (equal(v, x)) return true;
        return false;
    }
    if (name == "odd" || name == "even") {
        int64_t i = v.as_int();
        return ((i % 2) != 0) == (name == "odd");
    }
    if (name == "divisibleby") {
        int64_t d = argument(args, 0, "num").as_int();
        if (d == 0) fail("integer division or modulo by zero");
        return v.as_int() % d == 0;
    }
    if (name == "lower" || name == "upper") {
        Value r;
        CallArgs none;
        string_method(to_str(v), "is" + name, none, r, env);
        return r.boolean;
    }
    fail("no test named '{}'", name);
}

}  // namespace dl::tmpl
