// The renderer: walks the parsed template over a context, with jinja2's scoping (a for loop's
// body and a macro's body are scopes of their own; if is not), loop variables, macros and call
// blocks, loop controls and the resource limits.
#include <cmath>
#include <ctime>
#include <unordered_map>

#include "template/ast.h"
#include "template/builtins.h"
#include "template/operators.h"
#include "template/template.h"

namespace dl::tmpl {
namespace {

// An error that already says where it happened; not wrapped again by enclosing nodes.
class LocatedError : public Error {
  public:
    explicit LocatedError(const std::string& what) : Error(what) {}
};

struct Frame {
    std::unordered_map<std::string, Value> vars;
    Frame* parent = nullptr;
};

enum class Flow { Normal, Break, Continue };

class Renderer final : public Environment {
  public:
    Renderer(const RenderOptions& options, Frame& root) : options_(options), root_(root) {}

    Value filter(const std::string& name, const Value& value, CallArgs& args) override {
        return apply_filter(name, value, args, *this);
    }
    bool test(const std::string& name, const Value& value, CallArgs& args) override {
        return apply_test(name, value, args, *this);
    }
    size_t max_string_bytes() const override { return options_.limits.max_output_bytes; }
    void count_iterations(uint64_t n) override {
        iterations_ += n;
        if (iterations_ > options_.limits.max_loop_iterations)
            throw LocatedError(fmt::format("chat template exceeds the limit of {} loop iterations",
                                           options_.limits.max_loop_iterations));
    }

    Flow exec_body(const Body& body, Frame& f, std::string& out) {
        for (const auto& n : body) {
            Flow flow = exec(*n, f, out);
            if (flow != Flow::Normal) return flow;
        }
        return Flow::Normal;
    }

  private:
    const RenderOptions& options_;
    Frame& root_;
    uint64_t iterations_ = 0;
    int call_depth_ = 0;

    void append(std::string& out, const std::string& s) {
        if (out.size() + s.size() > options_.limits.max_output_bytes)
            throw LocatedError(fmt::format("chat template output exceeds the limit of {} bytes",
                                           options_.limits.max_output_bytes));
        out += s;
    }

    static Value* lookup(Frame& f, const std::string& name) {
        for (Frame* p = &f; p; p = p->parent) {
            auto it = p->vars.find(name);
            if (it != p->vars.end()) return &it->second;
        }
        return nullptr;
    }

    Flow exec(const Node& n, Frame& f, std::string& out) {
        try {
            return exec_node(n, f, out);
        } catch (const LocatedError&) {
            throw;
        } catch (const RaisedError&) {
            throw;
        } catch (const Error& e) {
            throw LocatedError(fmt::format("chat template line {}: {}", n.line, e.what()));
        }
    }

    Flow exec_node(const Node& n, Frame& f, std::string& out) {
        switch (n.kind) {
            case Node::Kind::Text:
                append(out, n.text);
                return Flow::Normal;
            case Node::Kind::Output:
                append(out, to_str(eval(*n.expr, f)));
                return Flow::Normal;
            case Node::Kind::If:
                for (const auto& [cond, body] : n.branches) {
                    if (!cond || eval(*cond, f).truthy()) return exec_body(body, f, out);
                }
                return Flow::Normal;
            case Node::Kind::For:
                return exec_for(n, f, out);
            case Node::Kind::Set: {
                Value v = eval(*n.expr, f);
                if (!n.name.empty()) {
                    Value* ns = lookup(f, n.targets[0]);
                    if (!ns || !ns->is_object() || !ns->is_namespace)
                        fail("cannot assign attribute on non-namespace object");
                    if (v.is_namespace || v.holds_namespace)
                        fail("a namespace attribute cannot hold a namespace");
                    ns->set(n.name, std::move(v));
                } else {
                    assign(n.targets, std::move(v), f);
                }
                return Flow::Normal;
            }
            case Node::Kind::SetBlock: {
                std::string body;
                exec_body(n.body, f, body);
                Value v = Value::from_string(std::move(body));
                if (n.filter) v = apply_body_filter(*n.filter, std::move(v), f);
                f.vars[n.targets[0]] = std::move(v);
                return Flow::Normal;
            }
            case Node::Kind::FilterBlock: {
                std::string body;
                exec_body(n.body, f, body);
                append(out, to_str(apply_body_filter(*n.filter, Value::from_string(body), f)));
                return Flow::Normal;
            }
            case Node::Kind::Macro:
                f.vars[n.name] = make_macro(n, &root_);
                return Flow::Normal;
            case Node::Kind::CallBlock: {
                // caller() renders the block's body in a scope of the block's own.
                Frame* outer = &f;
                Value caller = make_macro(n, outer);
                const Expr& call = *n.expr;
                Value callee = eval(*call.args[0], f);
                CallArgs args = eval_args(call, f, 1);
                args.keyword.emplace_back("caller", caller);
                append(out, to_str(invoke(callee, args)));
                return Flow::Normal;
            }
            case Node::Kind::Break:
                return Flow::Break;
            case Node::Kind::Continue:
                return Flow::Continue;
            case Node::Kind::Generation:
                return exec_body(n.body, f, out);
        }
        return Flow::Normal;
    }

    Value apply_body_filter(const Expr& chain, Value body, Frame& f) {
        Frame inner;
        inner.parent = &f;
        inner.vars[kBodyName] = std::move(body);
        return eval(chain, inner);
    }

    void assign(const std::vector<std::string>& targets, Value v, Frame& f) {
        if (targets.size() == 1) {
            f.vars[targets[0]] = std::move(v);
            return;
        }
        Array items = iterate(v);
        if (items.size() != targets.size())
            fail("cannot unpack {} values into {} names", items.size(), targets.size());
        for (size_t i = 0; i < targets.size(); ++i) f.vars[targets[i]] = items[i];
    }

    Flow exec_for(const Node& n, Frame& f, std::string& out) {
        Array all = iterate(eval(*n.expr, f));
        Array items;
        if (n.condition) {
            for (auto& item : all) {
                count_iterations(1);
                Frame probe;
                probe.parent = &f;
                assign(n.targets, item, probe);
                if (eval(*n.condition, probe).truthy()) items.push_back(std::move(item));
            }
        } else {
            items = std::move(all);
        }
        if (items.empty()) {
            exec_body(n.else_body, f, out);
            return Flow::Normal;
        }
        const int64_t length = int64_t(items.size());
        for (int64_t i = 0; i < length; ++i) {
            count_iterations(1);
            Frame it;  // jinja2 starts every iteration in a fresh scope
            it.parent = &f;
            Object loop;
            loop.emplace_back("index", Value::from_int(i + 1));
            loop.emplace_back("index0", Value::from_int(i));
            loop.emplace_back("revindex", Value::from_int(length - i));
            loop.emplace_back("revindex0", Value::from_int(length - i - 1));
            loop.emplace_back("first", Value::from_bool(i == 0));
            loop.emplace_back("last", Value::from_bool(i == length - 1));
            loop.emplace_back("length", Value::from_int(length));
            loop.emplace_back("depth", Value::from_int(1));
            loop.emplace_back("depth0", Value::from_int(0));
            loop.emplace_back("previtem", i > 0 ? items[size_t(i - 1)] : Value());
            loop.emplace_back("nextitem", i + 1 < length ? items[size_t(i + 1)] : Value());
            Array cycle_items;
            loop.emplace_back("cycle", Value::from_function([i](CallArgs& a) -> Value {
                                  if (a.positional.empty()) fail("no items for cycling given");
                                  return a.positional[size_t(i) % a.positional.size()];
                              }));
            it.vars["loop"] = Value::from_object(std::move(loop));
            assign(n.targets, items[size_t(i)], it);
            if (exec_body(n.body, it, out) == Flow::Break) break;
        }
        return Flow::Normal;
    }

    // A macro (or a call block's caller): binds its parameters in a scope of its own whose
    // parent is the template's top level (or the call block's scope).
    Value make_macro(const Node& n, Frame* parent) {
        const Node* node = &n;
        return Value::from_function([this, node, parent](CallArgs& args) -> Value {
            return run_macro(*node, args, parent);
        });
    }

    Value run_macro(const Node& n, CallArgs& args, Frame* parent) {
        if (++call_depth_ > options_.limits.max_call_depth) {
            --call_depth_;
            throw LocatedError(
                fmt::format("chat template line {}: macro calls nest deeper than the limit of {}",
                            n.line, options_.limits.max_call_depth));
        }
        struct Leave {
            int& d;
            ~Leave() { --d; }
        } leave{call_depth_};
        Frame frame;
        frame.parent = parent;
        Array varargs;
        for (size_t i = 0; i < args.positional.size(); ++i) {
            if (i < n.params.size()) {
                frame.vars[n.params[i].first] = args.positional[i];
            } else {
                varargs.push_back(args.positional[i]);
            }
        }
        Object kwargs;
        for (auto& [k, v] : args.keyword) {
            bool is_param = false;
            for (const auto& p : n.params) is_param = is_param || p.first == k;
            if (is_param || k == "caller") {
                frame.vars[k] = v;
            } else {
                kwargs.emplace_back(k, v);
            }
        }
        for (const auto& [name, def] : n.params) {
            if (!frame.vars.count(name)) frame.vars[name] = def ? eval(*def, frame) : Value();
        }
        frame.vars["varargs"] = Value::from_array(std::move(varargs), true);
        frame.vars["kwargs"] = Value::from_object(std::move(kwargs));
        std::string out;
        exec_body(n.body, frame, out);
        return Value::from_string(std::move(out));
    }

    CallArgs eval_args(const Expr& e, Frame& f, size_t first) {
        CallArgs args;
        for (size_t i = first; i < e.args.size(); ++i)
            args.positional.push_back(eval(*e.args[i], f));
        for (const auto& [k, v] : e.kwargs) args.keyword.emplace_back(k, eval(*v, f));
        return args;
    }

    Value invoke(const Value& callee, CallArgs& args) {
        if (!callee.is_callable()) {
            if (callee.is_undefined()) fail("an undefined value was called");
            fail("'{}' object is not callable", type_name(callee));
        }
        return (*callee.function)(args);
    }

    Value eval(const Expr& e, Frame& f) {
        switch (e.kind) {
            case Expr::Kind::Literal:
                return e.literal;
            case Expr::Kind::Name: {
                if (Value* v = lookup(f, e.name)) return *v;
                return Value();
            }
            case Expr::Kind::List:
            case Expr::Kind::Tuple: {
                Array a;
                for (const auto& x : e.args) a.push_back(eval(*x, f));
                return Value::from_array(std::move(a), e.kind == Expr::Kind::Tuple);
            }
            case Expr::Kind::Dict: {
                Value d = Value::from_object({});
                for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
                    Value k = eval(*e.args[i], f);
                    if (!k.is_string()) fail("dict keys must be strings here");
                    d.set(k.string, eval(*e.args[i + 1], f));
                }
                return Value::from_object(std::move(*d.object));  // tracks depth
            }
            case Expr::Kind::Attribute: {
                Value obj = eval(*e.args[0], f);
                if (obj.is_undefined()) fail("{} is undefined", describe(*e.args[0]));
                return get_attribute(obj, e.name, *this);
            }
            case Expr::Kind::Item: {
                Value obj = eval(*e.args[0], f);
                if (obj.is_undefined()) fail("{} is undefined", describe(*e.args[0]));
                return get_item(obj, eval(*e.args[1], f), *this);
            }
            case Expr::Kind::Slice: {
                Value obj = eval(*e.args[0], f);
                if (obj.is_undefined()) fail("{} is undefined", describe(*e.args[0]));
                Value b[3] = {Value::none(), Value::none(), Value::none()};  // x[:] is x[None:None]
                for (int i = 0; i < 3; ++i)
                    if (e.args[size_t(i) + 1]) b[i] = eval(*e.args[size_t(i) + 1], f);
                return get_slice(obj, b[0], b[1], b[2]);
            }
            case Expr::Kind::Call:
                return eval_call(e, f);
            case Expr::Kind::Filter: {
                Value v = eval(*e.args[0], f);
                CallArgs args = eval_args(e, f, 1);
                return apply_filter(e.name, v, args, *this);
            }
            case Expr::Kind::Test: {
                Value v = eval(*e.args[0], f);
                CallArgs args = eval_args(e, f, 1);
                if ((e.name == "defined" || e.name == "undefined") && args.positional.empty() &&
                    args.keyword.empty()) {
                    bool defined = !v.is_undefined();
                    return Value::from_bool((e.name == "defined") == defined ? !e.negated
                                                                             : e.negated);
                }
                return Value::from_bool(apply_test(e.name, v, args, *this) != e.negated);
            }
            case Expr::Kind::Unary: {
                Value v = eval(*e.args[0], f);
                if (e.name == "not") return Value::from_bool(!v.truthy());
                if (v.type == Value::Type::Float)
                    return Value::from_float(e.name == "-" ? -v.number : v.number);
                if (v.type == Value::Type::Int || v.type == Value::Type::Bool)
                    if (e.name == "-" && v.as_int() == INT64_MIN)
                        fail("integer result of '-' is out of range");
                return Value::from_int(e.name == "-" ? -v.as_int() : v.as_int());
                fail("bad operand type for unary {}: '{}'", e.name, type_name(v));
            }
            case Expr::Kind::And: {
                Value l = eval(*e.args[0], f);
                return l.truthy() ? eval(*e.args[1], f) : l;
            }
            case Expr::Kind::Or: {
                Value l = eval(*e.args[0], f);
                return l.truthy() ? l : eval(*e.args[1], f);
            }
            case Expr::Kind::Condition:
                if (eval(*e.args[1], f).truthy()) return eval(*e.args[0], f);
                return e.args[2] ? eval(*e.args[2], f) : Value();
            case Expr::Kind::Binary:
                return binary(e.name, eval(*e.args[0], f), eval(*e.args[1], f));
        }
        return Value();
    }

    static std::string describe(const Expr& e) {
        if (e.kind == Expr::Kind::Name) return "'" + e.name + "'";
        if (e.kind == Expr::Kind::Attribute) return describe(*e.args[0]) + "." + e.name;
        return "the value";
    }

    Value eval_call(const Expr& e, Frame& f) {
        const Expr& callee = *e.args[0];
        if (callee.kind == Expr::Kind::Attribute) {
            Value self = eval(*callee.args[0], f);
            if (self.is_undefined()) fail("{} is undefined", describe(*callee.args[0]));
            CallArgs args = eval_args(e, f, 1);
            Value result;
            if (call_method(self, callee.name, args, result, *this)) return result;
            return invoke(get_attribute(self, callee.name, *this), args);
        }
        Value fn = eval(callee, f);
        CallArgs args = eval_args(e, f, 1);
        return invoke(fn, args);
    }

  public:
    // The template's global functions, bound below the context so a context key can hide one.
    void add_globals(Frame& frame) {
        for (const char* name : {"raise_exception", "range", "namespace", "dict", "strftime_now"}) {
            std::string n = name;
            frame.vars[n] = Value::from_function(
                [this, n](CallArgs& args) -> Value { return call_global(n, args); });
        }
    }

  private:
    Value call_global(const std::string& name, CallArgs& args) {
        if (name == "raise_exception") {
            Value msg = argument(args, 0, "message");
            throw RaisedError(to_str(msg));
        }
        if (name == "range") {
            int64_t start = 0, stop = 0, step = 1;
            auto& p = args.positional;
            if (p.size() == 1) {
                stop = p[0].as_int();
            } else if (p.size() >= 2) {
                start = p[0].as_int();
                stop = p[1].as_int();
                if (p.size() >= 3) step = p[2].as_int();
            } else {
                fail("range expected at least 1 argument");
            }
            if (step == 0) fail("range() arg 3 must not be zero");
            Array a;
            for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
                count_iterations(1);
                a.push_back(Value::from_int(i));
                if (__builtin_add_overflow(i, step, &i)) break;
            }
            return Value::from_array(std::move(a));
        }
        if (name == "namespace" || name == "dict") {
            Value staging = Value::from_object({});  // set() keeps the last of repeated keys
            for (const auto& p : args.positional) {
                if (!p.is_object()) fail("{}() takes a mapping", name);
                for (const auto& [k, v] : *p.object) staging.set(k, v);
            }
            for (auto& [k, v] : args.keyword) staging.set(k, v);
            Value ns = Value::from_object(std::move(*staging.object));  // tracks depth
            ns.is_namespace = name == "namespace";
            return ns;
        }
        if (name == "strftime_now") {
            std::string format = to_str(argument(args, 0, "format"));
            std::time_t t = options_.now ? std::time_t(*options_.now) : std::time(nullptr);
            std::tm tm{};
            if (options_.now) {
                gmtime_r(&t, &tm);
            } else {
                localtime_r(&t, &tm);
            }
            char buf[512];
            size_t n =
                format.size() < 200 ? std::strftime(buf, sizeof buf, format.c_str(), &tm) : 0;
            return Value::from_string(std::string(buf, n));
        }
        fail("'{}' is undefined", name);
    }

    Value binary(const std::string& op, const Value& a, const Value& b) {
        return binary_operator(op, a, b, options_.limits.max_output_bytes);
    }
};

}  // namespace

struct ChatTemplate::Parsed {
    Body body;
};

ChatTemplate::ChatTemplate(std::string_view source) : parsed_(std::make_unique<Parsed>()) {
    parsed_->body = parse(source);
}
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& context,
                                 const RenderOptions& options) const {
    if (!context.is_object()) fail("the chat template context must be a JSON object");
    Frame builtins;
    Frame globals;
    globals.parent = &builtins;
    for (const auto& [k, v] : context.items()) globals.vars[k] = Value::from_json(v);
    Frame top;
    top.parent = &globals;
    Renderer r(options, top);
    r.add_globals(builtins);
    std::string out;
    r.exec_body(parsed_->body, top, out);
    return out;
}

std::string render(std::string_view source, const nlohmann::ordered_json& context,
                   const RenderOptions& options) {
    return ChatTemplate(source).render(context, options);
}

}  // namespace dl::tmpl
