// The binary operators of the template language with Python's semantics: comparisons, "in",
// "~", arithmetic on ints (refusing overflow) and floats, sequence concatenation and
// repetition, and printf-style string formatting.
#include "template/operators.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace dl::tmpl {

namespace {

// Python's "text" % values for the conversions templates use: %s, %r, %d, %i and %%.
std::string percent_format(const std::string& f, const Value& values) {
    Array args = values.is_array() && values.is_tuple ? *values.array : Array{values};
    size_t next = 0;
    std::string out;
    for (size_t i = 0; i < f.size(); ++i) {
        if (f[i] != '%') {
            out += f[i];
            continue;
        }
        if (++i >= f.size()) fail("incomplete format");
        char c = f[i];
        if (c == '%') {
            out += '%';
            continue;
        }
        if (next >= args.size()) fail("not enough arguments for format string");
        const Value& v = args[next++];
        if (c == 's') {
            out += to_str(v);
        } else if (c == 'r') {
            out += to_repr(v);
        } else if (c == 'd' || c == 'i') {
            if (!v.is_number())
                fail("%{} format: a real number is required, not {}", c, type_name(v));
            out += std::to_string(v.as_int());
        } else {
            fail("unsupported format character '{}'", c);
        }
    }
    if (next < args.size()) fail("not all arguments converted during string formatting");
    return out;
}

}  // namespace

Value binary_operator(const std::string& op, const Value& a, const Value& b, size_t cap) {
    auto too_long = [&] {
        fail("the template builds a string longer than the limit of {} bytes", cap);
    };
    if (op == "==") return Value::from_bool(equal(a, b));
    if (op == "!=") return Value::from_bool(!equal(a, b));
    if (op == "<") return Value::from_bool(less(a, b));
    if (op == ">") return Value::from_bool(less(b, a));
    if (op == "<=") return Value::from_bool(less(a, b) || equal(a, b));
    if (op == ">=") return Value::from_bool(less(b, a) || equal(a, b));
    if (op == "in" || op == "not in") {
        bool found = false;
        if (b.is_string()) {
            if (!a.is_string()) fail("'in <string>' requires string as left operand");
            found = b.string.find(a.string) != std::string::npos;
        } else if (b.is_object()) {
            found = a.is_string() && b.find(a.string);
        } else if (b.is_array()) {
            for (const auto& x : *b.array) found = found || equal(a, x);
        } else if (!b.is_undefined()) {
            fail("argument of type '{}' is not iterable", type_name(b));
        }
        return Value::from_bool(found == (op == "in"));
    }
    if (op == "~") {
        std::string s = to_str(a) + to_str(b);
        if (s.size() > cap) too_long();
        return Value::from_string(std::move(s));
    }
    if (a.is_undefined() || b.is_undefined()) fail("an undefined value was used in '{}'", op);
    if (op == "+") {
        if (a.is_string() && b.is_string()) {
            if (a.string.size() + b.string.size() > cap) too_long();
            return Value::from_string(a.string + b.string);
        }
        if (a.is_array() && b.is_array()) {
            Array r = *a.array;
            r.insert(r.end(), b.array->begin(), b.array->end());
            return Value::from_array(std::move(r), a.is_tuple);
        }
    }
    if (op == "%" && a.is_string()) return Value::from_string(percent_format(a.string, b));
    if (op == "*" && (a.is_string() || a.is_array() || b.is_string() || b.is_array())) {
        const Value& seq = a.is_string() || a.is_array() ? a : b;
        const Value& count = &seq == &a ? b : a;
        if (count.type != Value::Type::Int && count.type != Value::Type::Bool)
            fail("can't multiply sequence by non-int of type '{}'", type_name(count));
        int64_t n = std::max<int64_t>(0, count.as_int());
        if (seq.is_string() ? seq.string.empty() : seq.array->empty()) n = 0;  // nothing to repeat
        size_t unit = seq.is_string() ? seq.string.size() : seq.array->size() * 16;
        if (n > 0 && unit > 0 && uint64_t(n) > cap / unit) too_long();
        if (seq.is_string()) {
            std::string s;
            for (int64_t i = 0; i < n; ++i) s += seq.string;
            return Value::from_string(std::move(s));
        }
        Array r;
        for (int64_t i = 0; i < n; ++i) r.insert(r.end(), seq.array->begin(), seq.array->end());
        return Value::from_array(std::move(r));
    }
    if (!a.is_number() || !b.is_number())
        fail("unsupported operand types for {}: '{}' and '{}'", op, type_name(a), type_name(b));
    bool ints = a.type != Value::Type::Float && b.type != Value::Type::Float;
    if (op == "/") {
        if (b.as_double() == 0) fail("division by zero");
        return Value::from_float(a.as_double() / b.as_double());
    }
    if (ints) {
        // Python's integers do not overflow; ours stop with an error where they would
        int64_t x = a.as_int(), y = b.as_int(), r = 0;
        auto checked = [&](bool overflow) {
            if (overflow) fail("integer result of '{}' is out of range", op);
            return Value::from_int(r);
        };
        if (op == "+") return checked(__builtin_add_overflow(x, y, &r));
        if (op == "-") return checked(__builtin_sub_overflow(x, y, &r));
        if (op == "*") return checked(__builtin_mul_overflow(x, y, &r));
        if (op == "//" || op == "%") {
            if (y == 0) fail("integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) return checked(true);
            int64_t q = x / y, r = x % y;
            if (r != 0 && ((r < 0) != (y < 0))) {
                --q;
                r += y;
            }
            return Value::from_int(op == "//" ? q : r);
        }
        if (op == "**") {
            if (y < 0) return Value::from_float(std::pow(double(x), double(y)));
            int64_t base = x, e = y;
            bool overflow = false;
            r = 1;
            while (e > 0 && !overflow) {  // by squaring
                if (e & 1) overflow = __builtin_mul_overflow(r, base, &r);
                e >>= 1;
                if (e > 0 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
            }
            return checked(overflow);
        }
    }
    double x = a.as_double(), y = b.as_double();
    if (op == "+") return Value::from_float(x + y);
    if (op == "-") return Value::from_float(x - y);
    if (op == "*") return Value::from_float(x * y);
    if (op == "//" || op == "%") {
        if (y == 0) fail("float division or modulo by zero");
        double r = std::fmod(x, y);
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        if (op == "%") return Value::from_float(r);
        return Value::from_float(std::floor((x - r) / y + 0.5));
    }
    if (op == "**") return Value::from_float(std::pow(x, y));
    fail("unsupported operator {}", op);
}

}  // namespace dl::tmpl
