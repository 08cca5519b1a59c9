// The built-in filters, tests, methods (str, dict, list) and attribute/item access of the
// template language, with Python's and jinja2's semantics.
#pragma once

#include <string>

#include "template/value.h"

namespace dl::tmpl {

// What filters such as map and selectattr need from the renderer: other filters and tests by
// name, and the limits.
class Environment {
  public:
    virtual ~Environment() = default;
    virtual Value filter(const std::string& name, const Value& value, CallArgs& args) = 0;
    virtual bool test(const std::string& name, const Value& value, CallArgs& args) = 0;
    virtual size_t max_string_bytes() const = 0;
    virtual void count_iterations(uint64_t n) = 0;
};

// Whether a filter or test of that name exists: jinja2 refuses a template naming an unknown one
// when it compiles it, before rendering anything.
bool is_filter_name(const std::string& name);
bool is_test_name(const std::string& name);

// dl::Error for an unknown filter or bad arguments.
Value apply_filter(const std::string& name, const Value& value, CallArgs& args, Environment& env);
bool apply_test(const std::string& name, const Value& value, CallArgs& args, Environment& env);

// self.name(args) for str, dict and list methods; false when self has no such method.
bool call_method(const Value& self, const std::string& name, CallArgs& args, Value& result,
                 Environment& env);
bool has_method(const Value& self, const std::string& name);

// obj.name: Python's getattr first (methods), then the item; undefined when neither exists.
Value get_attribute(const Value& object, const std::string& name, Environment& env);
// obj[key]: the item first, then getattr; undefined when neither exists.
Value get_item(const Value& object, const Value& key, Environment& env);
// obj[start:stop:step] over lists and strings.
Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step);
// The items a for loop or a filter walks: list items, dict keys, string characters.
Array iterate(const Value& v);

// The n-th positional argument or the keyword argument `name`, else `fallback`.
Value argument(CallArgs& args, size_t index, const char* name, Value fallback = Value());

}  // namespace dl::tmpl
