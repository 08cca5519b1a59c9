// The template parser: Jinja's grammar and operator precedence over the lexer's tokens. Over 600
// lines because the grammar is one recursive-descent class, each rule a method that calls the
// next: cut in two, a reader would follow the precedence across files.
#include <string_view>

#include "core/error.h"
#include "template/ast.h"
#include "template/builtins.h"
#include "template/lexer.h"

namespace dl::tmpl {
namespace {

constexpr int kMaxNesting = 200;  // deeper expressions or blocks are refused, not overflowed

class Parser {
  public:
    explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

    Body parse_template() {
        std::string end;
        Body body = parse_body({}, end);
        return body;
    }

  private:
    std::vector<Token> t_;
    size_t i_ = 0;
    int depth_ = 0;

    struct Nest {
        Parser& p;
        explicit Nest(Parser& parser, int line) : p(parser) {
            if (++p.depth_ > kMaxNesting)
                fail("chat template line {}: nesting deeper than {} levels", line, kMaxNesting);
        }
        ~Nest() { --p.depth_; }
    };

    const Token& cur() const { return t_[i_]; }
    const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
    int line() const { return cur().line; }

    static std::string describe(const Token& t) {
        switch (t.kind) {
            case TokenKind::Text:
                return "text";
            case TokenKind::VarBegin:
                return "'{{'";
            case TokenKind::VarEnd:
                return "'}}'";
            case TokenKind::BlockBegin:
                return "'{%'";
            case TokenKind::BlockEnd:
                return "'%}'";
            case TokenKind::End:
                return "the end of the template";
            case TokenKind::String:
                return "a string";
            default:
                return "'" + t.text + "'";
        }
    }

    [[noreturn]] void error(const std::string& what) const {
        fail("chat template line {}: {}, found {}", line(), what, describe(cur()));
    }

    bool is_op(std::string_view op) const {
        return cur().kind == TokenKind::Operator && cur().text == op;
    }
    bool is_name(std::string_view n) const {
        return cur().kind == TokenKind::Name && cur().text == n;
    }
    bool accept_op(std::string_view op) {
        if (!is_op(op)) return false;
        ++i_;
        return true;
    }
    bool accept_name(std::string_view n) {
        if (!is_name(n)) return false;
        ++i_;
        return true;
    }
    void expect_op(std::string_view op) {
        if (!accept_op(op)) error("expected '" + std::string(op) + "'");
    }
    std::string expect_name() {
        if (cur().kind != TokenKind::Name) error("expected a name");
        return t_[i_++].text;
    }
    void expect_block_end() {
        if (cur().kind != TokenKind::BlockEnd) error("expected '%}'");
        ++i_;
    }

    static std::shared_ptr<Expr> make(Expr::Kind kind, int line) {
        auto e = std::make_shared<Expr>();
        e->kind = kind;
        e->line = line;
        return e;
    }

    // Statements until "{% <one of ends> %}"; `found` is the end tag met (its name consumed).
    Body parse_body(const std::vector<std::string_view>& ends, std::string& found) {
        Body body;
        for (;;) {
            const Token& t = cur();
            if (t.kind == TokenKind::End) {
                if (ends.empty()) return body;
                fail("chat template line {}: unexpected end of template, '{}' was not closed",
                     t.line, ends.back());
            }
            if (t.kind == TokenKind::Text) {
                auto n = std::make_shared<Node>();
                n->kind = Node::Kind::Text;
                n->line = t.line;
                n->text = t.text;
                body.push_back(n);
                ++i_;
            } else if (t.kind == TokenKind::VarBegin) {
                ++i_;
                auto n = std::make_shared<Node>();
                n->kind = Node::Kind::Output;
                n->line = t.line;
                n->expr = parse_tuple_expression(true);
                if (cur().kind != TokenKind::VarEnd) error("expected '}}'");
                ++i_;
                body.push_back(n);
            } else if (t.kind == TokenKind::BlockBegin) {
                ++i_;
                if (cur().kind != TokenKind::Name) error("expected a tag name");
                for (auto e : ends) {
                    if (cur().text == e) {
                        found = t_[i_++].text;
                        return body;
                    }
                }
                body.push_back(parse_statement());
            } else {
                error("unexpected token");
            }
        }
    }

    NodePtr parse_statement() {
        Nest nest(*this, line());
        auto n = std::make_shared<Node>();
        n->line = line();
        std::string tag = expect_name();
        std::string end;
        if (tag == "if") {
            n->kind = Node::Kind::If;
            ExprPtr cond = parse_tuple_expression(false);
            expect_block_end();
            for (;;) {
                Body b = parse_body({"elif", "else", "endif"}, end);
                n->branches.emplace_back(cond, std::move(b));
                if (end == "endif") break;
                if (end == "else") {
                    expect_block_end();
                    n->branches.emplace_back(nullptr, parse_body({"endif"}, end));
                    break;
                }
                cond = parse_tuple_expression(false);
                expect_block_end();
            }
        } else if (tag == "for") {
            n->kind = Node::Kind::For;
            n->targets = parse_targets();
            if (!accept_name("in")) error("expected 'in'");
            n->expr = parse_tuple_expression(false);
            if (accept_name("if")) n->condition = parse_expression();
            if (accept_name("recursive")) error("recursive loops are not supported");
            expect_block_end();
            n->body = parse_body({"else", "endfor"}, end);
            if (end == "else") {
                expect_block_end();
                n->else_body = parse_body({"endfor"}, end);
            }
        } else if (tag == "set") {
            n->targets = parse_targets();
            if (accept_op(".")) {
                if (n->targets.size() != 1) error("expected '='");
                n->name = expect_name();
            }
            if (accept_op("=")) {
                n->kind = Node::Kind::Set;
                n->expr = parse_tuple_expression(true);
            } else {
                if (n->targets.size() != 1 || !n->name.empty()) error("expected '='");
                n->kind = Node::Kind::SetBlock;
                if (is_op("|")) n->filter = parse_filters(body_name());
                expect_block_end();
                n->body = parse_body({"endset"}, end);
            }
        } else if (tag == "macro") {
            n->kind = Node::Kind::Macro;
            n->name = expect_name();
            n->params = parse_params();
            expect_block_end();
            n->body = parse_body({"endmacro"}, end);
        } else if (tag == "call") {
            n->kind = Node::Kind::CallBlock;
            if (is_op("(")) n->params = parse_params();
            n->expr = parse_expression();
            if (n->expr->kind != Expr::Kind::Call) error("expected a call");
            expect_block_end();
            n->body = parse_body({"endcall"}, end);
        } else if (tag == "filter") {
            n->kind = Node::Kind::FilterBlock;
            --i_;  // parse_filters expects to stand on "|"; the tag name plays its part
            t_[i_] = Token{TokenKind::Operator, "|", 0, 0, t_[i_].line};
            n->filter = parse_filters(body_name());
            expect_block_end();
            n->body = parse_body({"endfilter"}, end);
        } else if (tag == "break" || tag == "continue") {
            n->kind = tag == "break" ? Node::Kind::Break : Node::Kind::Continue;
        } else if (tag == "generation") {
            n->kind = Node::Kind::Generation;
            expect_block_end();
            n->body = parse_body({"endgeneration"}, end);
        } else {
            fail("chat template line {}: unknown tag '{}'", n->line, tag);
        }
        expect_block_end();
        return n;
    }

    ExprPtr body_name() {
        auto e = make(Expr::Kind::Name, line());
        e->name = kBodyName;
        return e;
    }

    std::vector<std::string> parse_targets() {
        std::vector<std::string> names;
        bool paren = accept_op("(");
        names.push_back(expect_name());
        while (accept_op(",")) names.push_back(expect_name());
        if (paren) expect_op(")");
        return names;
    }

    std::vector<std::pair<std::string, ExprPtr>> parse_params() {
        std::vector<std::pair<std::string, ExprPtr>> params;
        expect_op("(");
        while (!accept_op(")")) {
            if (!params.empty()) expect_op(",");
            if (accept_op(")")) break;
            std::string name = expect_name();
            ExprPtr def;
            if (accept_op("=")) def = parse_expression();
            params.emplace_back(name, def);
        }
        return params;
    }

  public:
    // ---- expressions, loosest first ----
    ExprPtr parse_expression() { return parse_condition(true); }

  private:
    // Jinja reads a bare tuple ("a, b") wherever a statement or {{ }} takes an expression; an
    // if, elif or for takes no inline "x if c else y" there.
    ExprPtr parse_tuple_expression(bool with_condition) {
        int l = line();
        ExprPtr first = parse_condition(with_condition);
        if (!is_op(",")) return first;
        auto t = make(Expr::Kind::Tuple, l);
        t->args.push_back(first);
        while (accept_op(",")) {
            if (cur().kind == TokenKind::BlockEnd || cur().kind == TokenKind::VarEnd ||
                is_name("if") || is_name("recursive"))
                break;
            t->args.push_back(parse_condition(with_condition));
        }
        return t;
    }

    ExprPtr parse_condition(bool with_condition) {
        Nest nest(*this, line());
        ExprPtr e = parse_or();
        while (with_condition && is_name("if")) {
            int l = line();
            ++i_;
            auto c = make(Expr::Kind::Condition, l);
            c->args.push_back(e);
            c->args.push_back(parse_or());
            c->args.push_back(accept_name("else") ? parse_condition(true) : nullptr);
            e = c;
        }
        return e;
    }

    ExprPtr parse_or() {
        ExprPtr e = parse_and();
        while (is_name("or")) {
            auto b = make(Expr::Kind::Or, line());
            ++i_;
            b->args = {e, parse_and()};
            e = b;
        }
        return e;
    }

    ExprPtr parse_and() {
        ExprPtr e = parse_not();
        while (is_name("and")) {
            auto b = make(Expr::Kind::And, line());
            ++i_;
            b->args = {e, parse_not()};
            e = b;
        }
        return e;
    }

    ExprPtr parse_not() {
        if (is_name("not")) {
            Nest nest(*this, line());
            auto u = make(Expr::Kind::Unary, line());
            ++i_;
            u->name = "not";
            u->args.push_back(parse_not());
            return u;
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        ExprPtr e = parse_math1();
        ExprPtr result;
        for (;;) {
            std::string op;
            if (cur().kind == TokenKind::Operator &&
                (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                 cur().text == ">" || cur().text == "<=" || cur().text == ">=")) {
                op = cur().text;
                ++i_;
            } else if (is_name("in")) {
                op = "in";
                ++i_;
            } else if (is_name("not") && peek().kind == TokenKind::Name && peek().text == "in") {
                op = "not in";
                i_ += 2;
            } else {
                break;
            }
            auto b = make(Expr::Kind::Binary, line());
            b->name = op;
            ExprPtr right = parse_math1();
            b->args = {e, right};
            // a < b < c means (a < b) and (b < c), as in Python
            if (!result) {
                result = b;
            } else {
                auto a = make(Expr::Kind::And, b->line);
                a->args = {result, b};
                result = a;
            }
            e = right;
        }
        return result ? result : e;
    }

    ExprPtr binary(std::string op, ExprPtr l, ExprPtr r, int ln) {
        auto b = make(Expr::Kind::Binary, ln);
        b->name = std::move(op);
        b->args = {std::move(l), std::move(r)};
        return b;
    }

    ExprPtr parse_math1() {
        ExprPtr e = parse_concat();
        while (is_op("+") || is_op("-")) {
            std::string op = t_[i_++].text;
            e = binary(op, e, parse_concat(), line());
        }
        return e;
    }

    ExprPtr parse_concat() {
        ExprPtr e = parse_math2();
        while (accept_op("~")) e = binary("~", e, parse_math2(), line());
        return e;
    }

    ExprPtr parse_math2() {
        ExprPtr e = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            std::string op = t_[i_++].text;
            e = binary(op, e, parse_pow(), line());
        }
        return e;
    }

    ExprPtr parse_pow() {
        ExprPtr e = parse_unary(true);
        while (accept_op("**")) e = binary("**", e, parse_unary(true), line());
        return e;
    }

    ExprPtr parse_unary(bool with_filter) {
        Nest nest(*this, line());
        ExprPtr e;
        if (is_op("-") || is_op("+")) {
            auto u = make(Expr::Kind::Unary, line());
            u->name = t_[i_++].text;
            u->args.push_back(parse_unary(false));
            e = u;
        } else {
            e = parse_primary();
        }
        e = parse_postfix(e);
        if (with_filter) e = parse_filter_expr(e);
        return e;
    }

    ExprPtr parse_primary() {
        const Token& t = cur();
        int l = t.line;
        if (t.kind == TokenKind::Name) {
            ++i_;
            if (t.text == "true" || t.text == "True") return literal(Value::from_bool(true), l);
            if (t.text == "false" || t.text == "False") return literal(Value::from_bool(false), l);
            if (t.text == "none" || t.text == "None") return literal(Value::none(), l);
            auto n = make(Expr::Kind::Name, l);
            n->name = t.text;
            return n;
        }
        if (t.kind == TokenKind::String) {
            std::string s;
            while (cur().kind == TokenKind::String) s += t_[i_++].text;  // "a" "b" joins
            return literal(Value::from_string(s), l);
        }
        if (t.kind == TokenKind::Integer) {
            ++i_;
            return literal(Value::from_int(t.integer), l);
        }
        if (t.kind == TokenKind::Float) {
            ++i_;
            return literal(Value::from_float(t.number), l);
        }
        if (accept_op("(")) {
            if (accept_op(")")) return make(Expr::Kind::Tuple, l);
            ExprPtr e = parse_expression();
            if (is_op(",")) {
                auto tup = make(Expr::Kind::Tuple, l);
                tup->args.push_back(e);
                while (accept_op(",")) {
                    if (is_op(")")) break;
                    tup->args.push_back(parse_expression());
                }
                e = tup;
            }
            expect_op(")");
            return e;
        }
        if (accept_op("[")) {
            auto list = make(Expr::Kind::List, l);
            while (!accept_op("]")) {
                if (!list->args.empty()) expect_op(",");
                if (accept_op("]")) break;
                list->args.push_back(parse_expression());
            }
            return list;
        }
        if (accept_op("{")) {
            auto dict = make(Expr::Kind::Dict, l);
            while (!accept_op("}")) {
                if (!dict->args.empty()) expect_op(",");
                if (accept_op("}")) break;
                dict->args.push_back(parse_expression());
                expect_op(":");
                dict->args.push_back(parse_expression());
            }
            return dict;
        }
        error("expected an expression");
    }

    ExprPtr literal(Value v, int l) {
        auto e = make(Expr::Kind::Literal, l);
        e->literal = std::move(v);
        return e;
    }

    ExprPtr parse_postfix(ExprPtr e) {
        for (;;) {
            int l = line();
            if (accept_op(".")) {
                auto a = make(Expr::Kind::Attribute, l);
                if (cur().kind == TokenKind::Integer) {
                    a->kind = Expr::Kind::Item;
                    a->args = {e, literal(Value::from_int(cur().integer), l)};
                    ++i_;
                } else {
                    a->name = expect_name();
                    a->args = {e};
                }
                e = a;
            } else if (accept_op("[")) {
                e = parse_subscript(e, l);
            } else if (is_op("(")) {
                e = parse_call(e);
            } else {
                return e;
            }
        }
    }

    ExprPtr parse_subscript(ExprPtr object, int l) {
        ExprPtr parts[3];
        int colons = 0;
        for (;;) {
            if (accept_op("]")) break;
            if (accept_op(":")) {
                if (++colons > 2) error("expected ']'");
                continue;
            }
            if (parts[colons]) {
                // x[a, b] subscripts with the tuple (a, b)
                if (colons != 0 || !is_op(",")) error("expected ']'");
                auto t = make(Expr::Kind::Tuple, l);
                t->args.push_back(parts[0]);
                while (accept_op(",")) {
                    if (is_op("]")) break;
                    t->args.push_back(parse_expression());
                }
                parts[0] = t;
                continue;
            }
            parts[colons] = parse_expression();
        }
        if (colons == 0) {
            if (!parts[0]) error("expected a subscript");
            auto it = make(Expr::Kind::Item, l);
            it->args = {object, parts[0]};
            return it;
        }
        auto s = make(Expr::Kind::Slice, l);
        s->args = {object, parts[0], parts[1], parts[2]};
        return s;
    }

    // "(args, kw=value)" into e (whose args[0] is already set by the caller, or not).
    void parse_args(const std::shared_ptr<Expr>& e) {
        expect_op("(");
        bool first = true;
        while (!accept_op(")")) {
            if (!first) expect_op(",");
            first = false;
            if (accept_op(")")) break;
            if (cur().kind == TokenKind::Name && peek().kind == TokenKind::Operator &&
                peek().text == "=") {
                std::string key = t_[i_].text;
                i_ += 2;
                e->kwargs.emplace_back(key, parse_expression());
            } else {
                if (!e->kwargs.empty()) error("positional argument after keyword argument");
                e->args.push_back(parse_expression());
            }
        }
    }

    ExprPtr parse_call(ExprPtr callee) {
        auto c = make(Expr::Kind::Call, line());
        c->args.push_back(callee);
        parse_args(c);
        return c;
    }

    ExprPtr parse_filters(ExprPtr e) {
        while (accept_op("|")) {
            auto f = make(Expr::Kind::Filter, line());
            f->name = expect_name();
            while (accept_op(".")) f->name += "." + expect_name();  // jinja2 allows dotted names
            f->args.push_back(e);
            if (is_op("(")) parse_args(f);
            e = f;
        }
        return e;
    }

    ExprPtr parse_filter_expr(ExprPtr e) {
        for (;;) {
            if (is_op("|")) {
                e = parse_filters(e);
            } else if (is_name("is")) {
                ++i_;
                auto t = make(Expr::Kind::Test, line());
                t->negated = accept_name("not");
                t->name = expect_name();
                while (accept_op(".")) t->name += "." + expect_name();
                t->args.push_back(e);
                if (is_op("(")) {
                    parse_args(t);
                } else if (starts_test_argument()) {
                    t->args.push_back(parse_postfix(parse_primary()));
                }
                e = t;
            } else if (is_op("(")) {
                e = parse_call(e);
            } else {
                return e;
            }
        }
    }

    // "x is divisibleby 3": a test may take one argument without parentheses.
    bool starts_test_argument() const {
        const Token& t = cur();
        if (t.kind == TokenKind::String || t.kind == TokenKind::Integer ||
            t.kind == TokenKind::Float)
            return true;
        if (t.kind == TokenKind::Operator) return t.text == "[" || t.text == "{";
        if (t.kind != TokenKind::Name || t.text == "else" || t.text == "or" || t.text == "and")
            return false;
        if (t.text == "is")
            fail("chat template line {}: tests cannot be chained with 'is'", t.line);
        return true;  // as in jinja2, even "if", "in" or "not" is read as the argument's name
    }
};

// jinja2 refuses at compile time a filter or test it does not know, except inside an if (its
// test and bodies, not the loops, macros and blocks nested in them) or an inline if, where the
// error waits until the code runs.
void check_names(const Expr& e, bool soft) {
    if (e.kind == Expr::Kind::Condition) soft = true;
    if (!soft && e.kind == Expr::Kind::Filter && !is_filter_name(e.name))
        fail("chat template line {}: no filter named '{}'", e.line, e.name);
    if (!soft && e.kind == Expr::Kind::Test && !is_test_name(e.name))
        fail("chat template line {}: no test named '{}'", e.line, e.name);
    for (const auto& a : e.args)
        if (a) check_names(*a, soft);
    for (const auto& [k, v] : e.kwargs)
        if (v) check_names(*v, soft);
}

void check_names(const Body& body, bool soft) {
    for (const auto& n : body) {
        if (n->expr) check_names(*n->expr, soft);
        if (n->condition) check_names(*n->condition, false);
        if (n->filter) check_names(*n->filter, false);
        for (const auto& [name, def] : n->params)
            if (def) check_names(*def, false);
        for (const auto& [cond, branch] : n->branches) {
            if (cond) check_names(*cond, true);
            check_names(branch, true);
        }
        check_names(n->body, false);
        check_names(n->else_body, false);
    }
}

}  // namespace

Body parse(std::string_view source) {
    Body body = Parser(lex(source)).parse_template();
    check_names(body, false);
    return body;
}

}  // namespace dl::tmpl
