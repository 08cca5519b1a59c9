// Unit tests of the chat-template engine: each construct of the language real templates use,
// its whitespace rules, Python's printing, the errors and the resource limits. Expected strings
// are what Python's jinja2 (trim_blocks and lstrip_blocks on) renders.
#include <gtest/gtest.h>

#include "template/template.h"

namespace dl::tmpl {
namespace {

using ojson = nlohmann::ordered_json;

std::string r(std::string_view source, const ojson& context = ojson::object()) {
    RenderOptions o;
    o.now = 1721952000;  // 2024-07-26 00:00:00 UTC
    return render(source, context, o);
}

// The error message of a rendering that must fail.
std::string error_of(std::string_view source, const ojson& context = ojson::object(),
                     const Limits& limits = {}) {
    if (context.is_null()) return error_of(source, ojson::object(), limits);
    RenderOptions o;
    o.limits = limits;
    try {
        std::string out = render(source, context, o);
        return "no error; rendered: " + out;
    } catch (const Error& e) {
        return e.what();
    }
}

TEST(TemplateWhitespace, DashMarkersStripAllWhitespaceOnTheirSide) {
    EXPECT_EQ(r("a  \n {{- 'b' -}} \n  c"), "abc");
    EXPECT_EQ(r("a \n{%- if true -%}\n b \n{%- endif -%}\n c"), "abc");
    EXPECT_EQ(r("a \n {#- comment -#} \n b"), "ab");
}

TEST(TemplateWhitespace, TrimBlocksDropsTheNewlineAfterABlockTag) {
    EXPECT_EQ(r("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");
    EXPECT_EQ(r("{# note #}\nx"), "x");
    EXPECT_EQ(r("{{ 'v' }}\nx"), "v\nx");  // not after an expression
}

TEST(TemplateWhitespace, LstripBlocksRemovesIndentBeforeABlockTagOnly) {
    EXPECT_EQ(r("  {% if true %}\n    x\n  {% endif %}\n"), "    x\n");
    EXPECT_EQ(r("a\n    {{ 'b' }}"), "a\n    b");
    EXPECT_EQ(r("x  {% if true %}y{% endif %}"), "x  y");  // not at a line start
    EXPECT_EQ(r("a\n  {%+ if true %}b{% endif %}"), "a\n  b");
}

TEST(TemplateWhitespace, OneTrailingNewlineOfTheTemplateIsDropped) {
    EXPECT_EQ(r("x\n"), "x");
    EXPECT_EQ(r("x\n\n"), "x\n");
    EXPECT_EQ(r("a\r\nb"), "a\nb");
}

TEST(TemplateStatements, IfElifElse) {
    const char* t = "{% if n > 2 %}big{% elif n == 2 %}two{% else %}small{% endif %}";
    EXPECT_EQ(r(t, {{"n", 3}}), "big");
    EXPECT_EQ(r(t, {{"n", 2}}), "two");
    EXPECT_EQ(r(t, {{"n", 0}}), "small");
}

TEST(TemplateStatements, ForWithLoopVariables) {
    ojson c = {{"xs", {"a", "b", "c"}}};
    EXPECT_EQ(r("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
                c),
              "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;");
    EXPECT_EQ(r("{% for x in xs %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}|{% endfor %}", c),
              "<a>b|a<b>c|b<c>|");
    EXPECT_EQ(r("{% for x in xs %}{{ loop.cycle('o', 'e') }}{% endfor %}", c), "oeo");
}

TEST(TemplateStatements, ForFilterElseAndUnpacking) {
    EXPECT_EQ(r("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.length }} {% endfor %}"),
              "22 42 ");
    EXPECT_EQ(r("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
    EXPECT_EQ(
        r("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {{"d", {{"b", 1}, {"a", 2}}}}),
        "b=1;a=2;");
    EXPECT_EQ(r("{% for k in d %}{{ k }}{% endfor %}", {{"d", {{"x", 1}, {"y", 2}}}}), "xy");
    EXPECT_EQ(r("{% for ch in 'héllo' %}{{ ch }}.{% endfor %}"), "h.é.l.l.o.");
}

TEST(TemplateStatements, BreakAndContinue) {
    EXPECT_EQ(r("{% for i in range(10) %}{% if i == 4 %}{% break %}{% endif %}"
                "{% if i is odd %}{% continue %}{% endif %}{{ i }}{% endfor %}"),
              "02");
}

TEST(TemplateStatements, LoopScopeDoesNotLeakButNamespaceDoes) {
    EXPECT_EQ(
        r("{% set x = 1 %}{% for i in [5, 6] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}"),
        "15161");
    EXPECT_EQ(r("{% set ns = namespace(total=0) %}{% for i in [1, 2, 3] %}"
                "{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }}"),
              "6");
    EXPECT_EQ(r("{% if true %}{% set y = 'kept' %}{% endif %}{{ y }}"), "kept");
}

TEST(TemplateStatements, SetForms) {
    EXPECT_EQ(r("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
    EXPECT_EQ(r("{% set block %}Hello {{ name }}{% endset %}[{{ block }}]", {{"name", "you"}}),
              "[Hello you]");
    EXPECT_EQ(r("{% set s | upper %}shout{% endset %}{{ s }}"), "SHOUT");
}

TEST(TemplateStatements, MacrosWithDefaultsAndCallBlocks) {
    EXPECT_EQ(r("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                "{{ greet('A') }} {{ greet('B', '?') }} {{ greet(name='C', punct='.') }}"),
              "Hi A! Hi B? Hi C.");
    EXPECT_EQ(r("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
                "{% call wrap('b') %}bold {{ 1 + 1 }}{% endcall %}"),
              "<b>bold 2</b>");
    EXPECT_EQ(r("{% macro m() %}{{ varargs }}{% endmacro %}{{ m(1, 2) }}"), "(1, 2)");
    EXPECT_EQ(r("{% filter upper %}abc{% endfilter %}"), "ABC");
}

TEST(TemplateStatements, GenerationTagRendersItsBody) {
    EXPECT_EQ(r("{% generation %}answer{% endgeneration %}"), "answer");
}

TEST(TemplateExpressions, PythonPrinting) {
    EXPECT_EQ(
        r("{{ none }} {{ true }} {{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e-5 }} {{ 7 / 2 }}"),
        "None True 1.0 0.30000000000000004 1e+20 1e-05 3.5");
    EXPECT_EQ(r("{{ [1, 'a', none, {'k': false}] }}"), "[1, 'a', None, {'k': False}]");
    EXPECT_EQ(r("{{ (1,) }} {{ \"it's\" }} {{ ['it\\'s'] }}"), "(1,) it's [\"it's\"]");
}

TEST(TemplateExpressions, ArithmeticAndComparisons) {
    EXPECT_EQ(r("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} {{ (1 + 2) "
                "* 3 }}"),
              "3 -4 2 1024 7 9");
    EXPECT_EQ(r("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 'ab' < 'b' }}"),
              "True False True True True");
    EXPECT_EQ(r("{{ 'ab' * 3 }} {{ [1] + [2] }} {{ 'x' ~ 1 ~ none }}"), "ababab [1, 2] x1None");
}

TEST(TemplateExpressions, LogicInAndConditionals) {
    EXPECT_EQ(r("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}"),
              "True True True True");
    EXPECT_EQ(r("{{ 'yes' if x else 'no' }} {{ x or 'fallback' }} {{ x and 'never' }}|"
                "{{ 'shown' if false }}|",
                {{"x", ""}}),
              "no fallback ||");
    EXPECT_EQ(r("{{ not x is defined }} {{ -n|abs }}", {{"n", 5}}), "True 5");
}

TEST(TemplateExpressions, SubscriptsAndSlices) {
    ojson c = {{"xs", {1, 2, 3, 4}}, {"s", "héllo"}};
    EXPECT_EQ(
        r("{{ xs[0] }} {{ xs[-1] }} {{ xs[1:3] }} {{ xs[::-1] }} {{ xs[::2] }} {{ xs[:-1] }}", c),
        "1 4 [2, 3] [4, 3, 2, 1] [1, 3] [1, 2, 3]");
    EXPECT_EQ(r("{{ s[1] }} {{ s[::-1] }} {{ s[1:3] }} {{ s[-3:] }}", c), "é olléh él llo");
    EXPECT_EQ(r("[{{ xs[10] }}]", c), "[]");
    EXPECT_EQ(r("{{ d.a }} {{ d['a'] }} {{ d.items()|list }} {{ d.get('z', 0) }} {{ d.get('a') }}",
                {{"d", {{"a", 1}}}}),
              "1 1 [('a', 1)] 0 1");
}

TEST(TemplateExpressions, StringMethods) {
    EXPECT_EQ(r("{{ s.startswith('ab') }} {{ s.endswith(('x', 'ef')) }} {{ s.upper() }}",
                {{"s", "abcdef"}}),
              "True True ABCDEF");
    EXPECT_EQ(r("{{ ' a b  '.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }}"),
              "['a', 'b'] ['a', 'b', '', 'c'] ['a', 'b,c']");
    EXPECT_EQ(r("[{{ '\\n x \\n'.strip() }}] [{{ 'xxhixx'.strip('x') }}] [{{ '  a '.lstrip() }}] "
                "[{{ '  a '.rstrip() }}]"),
              "[x] [hi] [a ] [  a]");
    EXPECT_EQ(r("{{ 'aXbX'.replace('X', '-') }} {{ 'Hi {}, {name}!'.format('A', name='B') }} "
                "{{ 'hello world'.title() }} {{ 'MiXed'.lower() }}"),
              "a-b- Hi A, B! Hello World mixed");
}

TEST(TemplateFilters, Tojson) {
    ojson c = ojson::parse(R"({"v": {"b": [1, 2.5, true, null], "a": "é\"\n<>&"}})");
    EXPECT_EQ(r("{{ v|tojson }}", c), R"({"b": [1, 2.5, true, null], "a": "é\"\n<>&"})");
    EXPECT_EQ(
        r("{{ v|tojson(indent=2) }}", c),
        "{\n  \"b\": [\n    1,\n    2.5,\n    true,\n    null\n  ],\n  \"a\": \"é\\\"\\n<>&\"\n}");
    EXPECT_EQ(r("{{ v|tojson(separators=(',', ':'), sort_keys=true) }}", c),
              R"({"a":"é\"\n<>&","b":[1,2.5,true,null]})");
    EXPECT_EQ(r("{{ v.a|tojson(ensure_ascii=true) }}", c), R"("\u00e9\"\n<>&")");
    EXPECT_EQ(r("{{ {}|tojson(indent=4) }} {{ []|tojson }}"), "{} []");
}

TEST(TemplateFilters, StringFilters) {
    EXPECT_EQ(
        r("[{{ '  x  '|trim }}] {{ 'ab'|upper }} {{ 'AB'|lower }} {{ 'hello world'|capitalize }} "
          "{{ 'hello-world x'|title }}"),
        "[x] AB ab Hello world Hello-World X");
    EXPECT_EQ(r("{{ 'aaa'|replace('a', 'b', 2) }} {{ 5|string ~ 'x' }} {{ '<a>'|safe }} {{ "
                "'<a&\"'|escape }}"),
              "bba 5x <a> &lt;a&amp;&#34;");
    EXPECT_EQ(r("{{ 'héllo'|length }} {{ [1, 2]|count }} {{ {'a': 1}|length }} {{ x|length }}"),
              "5 2 1 0");
}

TEST(TemplateFilters, SequenceFilters) {
    ojson c = ojson::parse(R"({"ms": [{"role": "user", "n": 1}, {"role": "assistant", "n": 2},
                                       {"role": "user", "n": 3}]})");
    EXPECT_EQ(r("{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='n')|list }}", c),
              "[1, 3]");
    EXPECT_EQ(r("{{ ms|rejectattr('role', 'eq', 'user')|map(attribute='n')|join(',') }}", c), "2");
    EXPECT_EQ(
        r("{{ ms|map(attribute='role')|unique|list }} {{ ms|first|tojson }} {{ (ms|last).n }}", c),
        "['user', 'assistant'] {\"role\": \"user\", \"n\": 1} 3");
    EXPECT_EQ(
        r("{{ [3, 1, 2]|sort }} {{ [1, 2]|reverse|list }} {{ ['a', 'b']|join }} {{ [1, 2]|sum }}"),
        "[1, 2, 3] [2, 1] ab 3");
    EXPECT_EQ(r("{{ ['a', 'b']|map('upper')|list }} {{ [0, 1, 2]|select|list }} {{ {'a': "
                "1}|items|list }}"),
              "['A', 'B'] [1, 2] [('a', 1)]");
}

TEST(TemplateFilters, NumbersAndDefaults) {
    EXPECT_EQ(r("{{ '42'|int }} {{ 'x'|int }} {{ 3.9|int }} {{ '1.5'|float }} {{ -3|abs }} "
                "{{ 2.5|round }} {{ 3.14159|round(2) }}"),
              "42 0 3 1.5 3 2.0 3.14");
    EXPECT_EQ(
        r("{{ x|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ x|d(1) }}"),
        "d  d 1");
}

TEST(TemplateTests, TypeAndValueTests) {
    ojson c =
        ojson::parse(R"({"s": "x", "n": 1, "f": 1.5, "b": false, "l": [], "d": {}, "z": null})");
    EXPECT_EQ(
        r("{{ s is string }}{{ n is number }}{{ n is integer }}{{ f is integer }}{{ f is float }}"
          "{{ b is boolean }}{{ b is false }}{{ n is true }}{{ z is none }}",
          c),
        "TrueTrueTrueFalseTrueTrueTrueFalseTrue");
    EXPECT_EQ(r("{{ d is mapping }}{{ l is mapping }}{{ l is iterable }}{{ s is iterable }}{{ n is "
                "iterable }}"
                "{{ l is sequence }}{{ q is defined }}{{ q is undefined }}{{ s is not none }}",
                c),
              "TrueFalseTrueTrueFalseTrueFalseTrueTrue");
    EXPECT_EQ(
        r("{{ 2 is in [1, 2] }}{{ 3 is equalto 3 }}{{ 4 is divisibleby 2 }}{{ 'a' is eq('b') }}"),
        "TrueTrueTrueFalse");
}

TEST(TemplateUndefined, BehavesAsJinja2DefaultUndefined) {
    EXPECT_EQ(r("[{{ missing }}]{% for x in missing %}x{% endfor %}[{{ d.nokey }}]{{ missing is "
                "defined }}",
                {{"d", ojson::object()}}),
              "[][]False");
    EXPECT_EQ(r("{{ missing == missing }} {{ not missing }} {{ 'a' in missing }}"),
              "True True False");
    EXPECT_NE(error_of("{{ missing.attr }}").find("'missing' is undefined"), std::string::npos);
    EXPECT_NE(error_of("{{ missing + 'x' }}").find("undefined"), std::string::npos);
}

TEST(TemplateGlobals, RaiseExceptionCarriesTheTemplatesMessage) {
    try {
        r("{{ raise_exception('Conversation roles must alternate') }}");
        FAIL() << "no error";
    } catch (const RaisedError& e) {
        EXPECT_STREQ(e.what(), "Conversation roles must alternate");
    }
}

TEST(TemplateGlobals, StrftimeNowRangeNamespaceDict) {
    EXPECT_EQ(r("{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d') }}"),
              "26 Jul 2024 2024-07-26");
    EXPECT_EQ(r("{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(3, 0, -1)|list }}"),
              "[0, 1, 2] [1, 3, 5] [3, 2, 1]");
    EXPECT_EQ(r("{% set ns = namespace(a=1) %}{% set ns.b = 2 %}{{ ns.a }}{{ ns.b }} {{ "
                "dict(x=1)|tojson }}"),
              "12 {\"x\": 1}");
}

TEST(TemplateErrors, SyntaxErrorsNameTheLine) {
    EXPECT_EQ(error_of("line one\n{% if x %}\nno end"),
              "chat template line 3: unexpected end of template, 'endif' was not closed");
    EXPECT_EQ(error_of("a\nb\n{{ 1 + }}"),
              "chat template line 3: expected an expression, found '}}'");
    EXPECT_EQ(error_of("\n{% frobnicate %}"), "chat template line 2: unknown tag 'frobnicate'");
    EXPECT_EQ(error_of("{{ 'open"), "chat template line 1: unterminated string literal");
    EXPECT_EQ(error_of("{# never closed"), "chat template line 1: unterminated comment");
}

TEST(TemplateErrors, UnknownFiltersAndTestsFailAtParseUnlessInsideAnIf) {
    EXPECT_EQ(error_of("ok\n{{ x|nosuch }}"), "chat template line 2: no filter named 'nosuch'");
    EXPECT_EQ(error_of("{% for i in [1] %}{{ i is nosuch }}{% endfor %}"),
              "chat template line 1: no test named 'nosuch'");
    // jinja2 defers these to run time, where the branch never goes
    EXPECT_EQ(r("{% if false %}{{ x|nosuch }}{% endif %}{{ 1 if true else x|nosuch }}"), "1");
    EXPECT_EQ(error_of("{% if true %}{{ x|nosuch }}{% endif %}"),
              "chat template line 1: no filter named 'nosuch'");
}

TEST(TemplateErrors, RuntimeErrorsNameTheLine) {
    EXPECT_EQ(error_of("ok\n{{ 'a' + 1 }}"),
              "chat template line 2: unsupported operand types for +: 'str' and 'int'");
    EXPECT_EQ(error_of("{{ x|nosuchfilter }}"),
              "chat template line 1: no filter named 'nosuchfilter'");
    EXPECT_EQ(error_of("{{ [].append(1) }}"),
              "chat template line 1: an undefined value was called");
    EXPECT_EQ(error_of("{% set d = {} %}{% set d.x = 1 %}"),
              "chat template line 1: cannot assign attribute on non-namespace object");
}

TEST(TemplateLimits, HostileTemplatesStopWithAClearError) {
    Limits small;
    small.max_loop_iterations = 1000;
    small.max_output_bytes = 1 << 16;
    small.max_call_depth = 16;
    EXPECT_EQ(error_of("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}",
                       {}, small),
              "chat template exceeds the limit of 1000 loop iterations");
    EXPECT_EQ(error_of("{% for i in range(400) %}{{ 'x' * 200 }}{% endfor %}", {}, small),
              "chat template output exceeds the limit of 65536 bytes");
    EXPECT_EQ(
        error_of("{{ 'x' * 100000000000 }}", {}, small),
        "chat template line 1: the template builds a string longer than the limit of 65536 bytes");
    EXPECT_EQ(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", {}, small),
              "chat template line 1: macro calls nest deeper than the limit of 16");
    std::string deep = std::string(5000, '(') + "1" + std::string(5000, ')');
    EXPECT_NE(error_of("{{ " + deep + " }}").find("nesting deeper than"), std::string::npos);
    std::string nested;
    for (int i = 0; i < 500; ++i) nested += "{% if true %}";
    EXPECT_NE(error_of(nested).find("nesting deeper than"), std::string::npos);
}

TEST(TemplateLimits, ValuesCannotNestWithoutBound) {
    EXPECT_EQ(error_of("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}"
                       "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}"),
              "chat template line 1: a list or dict nests deeper than the limit of 256 levels");
    EXPECT_EQ(error_of("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}"),
              "chat template line 1: a namespace attribute cannot hold a namespace");
    EXPECT_EQ(error_of("{% set ns = namespace() %}{% set ns.l = [ns] %}"),
              "chat template line 1: a namespace attribute cannot hold a namespace");
    ojson deep = 1;
    for (int i = 0; i < 1000; ++i) deep = ojson::array({deep});
    EXPECT_EQ(error_of("{{ x }}", {{"x", deep}}),
              "the context nests deeper than the limit of 256 levels");
}

TEST(TemplateLimits, IntegersStopAtTheEdgeOfTheirRangeInsteadOfWrapping) {
    EXPECT_EQ(error_of("{{ 9223372036854775807 + 1 }}"),
              "chat template line 1: integer result of '+' is out of range");
    EXPECT_EQ(error_of("{{ 2 ** 64 }}"),
              "chat template line 1: integer result of '**' is out of range");
    EXPECT_EQ(r("{{ (-1) ** 65 }} {{ 3 ** 4 }} {{ 2 ** 62 }}"), "-1 81 4611686018427387904");
    EXPECT_EQ(error_of("{{ 1e300|int }}"),
              "chat template line 1: 1e+300 is out of the integer range");
    // an empty sequence repeated any number of times is empty, at once
    EXPECT_EQ(r("{{ [] * 9223372036854775807 }}{{ '' * 9223372036854775807 }}"), "[]");
    EXPECT_EQ(r("{{ range(9223372036854775806, 9223372036854775807, 5)|list }}"),
              "[9223372036854775806]");
}

TEST(TemplateApi, ParsedTemplateRendersManyContexts) {
    ChatTemplate t(
        "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
        "{% if add_generation_prompt %}[assistant] {% endif %}");
    ojson c = ojson::parse(R"({"messages": [{"role": "user", "content": "{{ not jinja }}"}],
                               "add_generation_prompt": true})");
    EXPECT_EQ(t.render(c), "[user] {{ not jinja }}\n[assistant] ");
    c["add_generation_prompt"] = false;
    EXPECT_EQ(t.render(c), "[user] {{ not jinja }}\n");
    EXPECT_THROW(t.render(ojson::array()), Error);
}

}  // namespace
}  // namespace dl::tmpl
