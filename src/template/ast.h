// The parsed form of a chat template: expressions and statements as the parser builds them and
// the renderer walks them.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace dl::tmpl {

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
    enum class Kind {
        Literal,    // literal
        Name,       // name
        List,       // args: items
        Tuple,      // args: items
        Dict,       // args: key, value, key, value ...
        Attribute,  // args[0].name
        Item,       // args[0][args[1]]
        Slice,      // args[0][args[1]:args[2]:args[3]], each bound may be null
        Call,       // args[0](args[1..], kwargs)
        Filter,     // args[0] | name(args[1..], kwargs)
        Test,       // args[0] is [not] name(args[1..], kwargs)
        Unary,      // name ("-", "+", "not") args[0]
        Binary,     // args[0] name args[1]: arithmetic, "~", comparisons, "in", "not in"
        And,
        Or,
        Condition,  // args[0] if args[1] else args[2] (null: undefined)
    };
    Kind kind = Kind::Literal;
    int line = 0;
    Value literal;
    std::string name;
    bool negated = false;  // Test: "is not"
    std::vector<ExprPtr> args;
    std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

// The name the filters of a filter block or block set read their rendered body from.
inline constexpr const char* kBodyName = "\x01body";

struct Node;
using NodePtr = std::shared_ptr<const Node>;
using Body = std::vector<NodePtr>;

struct Node {
    enum class Kind {
        Text,         // text
        Output,       // {{ expr }}
        If,           // branches: (condition, body) ...; a null condition is the else
        For,          // for targets in expr [if condition] body [else else_body]
        Set,          // set targets = expr; set targets[0].attribute = expr
        SetBlock,     // set targets[0] [| filter] body endset
        Macro,        // macro name(params) body
        CallBlock,    // call(params) expr body
        FilterBlock,  // filter chain over body
        Break,
        Continue,
        Generation,  // transformers' {% generation %}: renders its body unchanged
    };
    Kind kind = Kind::Text;
    int line = 0;
    std::string text;
    std::string name;                  // Macro name; Set with an attribute: the attribute
    std::vector<std::string> targets;  // names bound by For / Set
    ExprPtr expr;
    ExprPtr condition;  // For's filter
    ExprPtr filter;     // SetBlock's and FilterBlock's filters over kBodyName
    std::vector<std::pair<ExprPtr, Body>> branches;
    std::vector<std::pair<std::string, ExprPtr>> params;  // Macro and CallBlock parameters
    Body body;
    Body else_body;
};

// Parses a template; dl::Error with the line for any syntax error.
Body parse(std::string_view source);

}  // namespace dl::tmpl
