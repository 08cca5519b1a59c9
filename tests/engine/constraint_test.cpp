// The output constraints. JSON against nlohmann::json's parser: every text the recognizer reads
// whole is an object the parser accepts, every object the parser accepts is read whole, byte by
// byte, and a sampler under the constraint writes JSON whatever the logits say. A forced opening
// (a tool call's) is written first, after a thinking block, whatever the logits say.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json_text.h"
#include "engine/json_constraint.h"
#include "engine/json_schema.h"
#include "engine/logit_bias.h"
#include "engine/prefix_constraint.h"
#include "engine/sampler.h"
#include "tokenizer/tiny_vocab.h"
#include "tokenizer/tokenizer.h"

namespace dl {
namespace {

// Whether the recognizer reads all of s and stands at the end of an object.
bool reads_whole(const std::string& s) {
    JsonPrefix p;
    for (char c : s)
        if (!p.feed((uint8_t)c)) return false;
    return p.complete();
}

// The recognizer's bounds on numbers: digits before the point and in the exponent.
bool numbers_within_bounds(const std::string& s) {
    bool in_str = false, esc = false;
    int run = 0;            // digits in the current run
    bool exponent = false;  // the run is an exponent's
    bool fraction = false;  // the run is after a point
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (esc) {
            esc = false;
            continue;
        }
        if (in_str) {
            if (c == '\\') esc = true;
            if (c == '"') in_str = false;
            continue;
        }
        if (c == '"') in_str = true;
        if (c >= '0' && c <= '9') {
            ++run;
            if (!fraction &&
                run > (exponent ? JsonPrefix::kMaxExponentDigits : JsonPrefix::kMaxIntegerDigits))
                return false;
            continue;
        }
        if (c == 'e' || c == 'E') {
            exponent = true;
            fraction = false;
        } else if (c == '.') {
            fraction = true;
        } else if (c != '+' && c != '-') {
            exponent = fraction = false;
        }
        run = 0;
    }
    return true;
}

// The parser's verdict, limited to what the recognizer promises: an object at the top, nesting,
// blank runs and numbers within its bounds.
bool parser_accepts_object(const std::string& s) {
    if (!numbers_within_bounds(s)) return false;
    if (!nlohmann::json::accept(s) || !nlohmann::json::parse(s).is_object()) return false;
    int blanks = 0, most_blanks = 0, breaks = 0, most_breaks = 0;
    bool in_string = false, escape = false;
    for (char c : s) {
        if (in_string) {
            if (escape)
                escape = false;
            else if (c == '\\')
                escape = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        const bool blank = c == ' ' || c == '\t' || c == '\n' || c == '\r';
        blanks = blank ? blanks + 1 : 0;
        breaks = blank ? breaks + (c == '\n') : 0;
        most_blanks = std::max(most_blanks, blanks);
        most_breaks = std::max(most_breaks, breaks);
        if (c == '"') in_string = true;
    }
    return json_nesting_depth(s) <= (size_t)JsonPrefix::kMaxDepth &&
           most_blanks <= JsonPrefix::kMaxWhitespace && most_breaks <= 1;
}

const std::vector<std::string> kDocuments = {
    R"({})",
    R"( { "a" : 1 } )",
    R"({"a":[1,2.5,-3e10,0,-0.0,1E+2,1e-2,true,false,null,"x",{},[]]})",
    R"({"nested":{"deeper":{"list":[[[]],[{"k":"v"}]]}},"n":-12.75e-3})",
    "{\"unicode\":\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xE4\xB8\xAD\"}",
    R"({"escapes":"\" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00 \u0000"})",
    "{\n  \"pretty\": [\n    1,\n    2\n  ],\n\t\"tab\": \"x\"\r\n}",
    R"({"":"","a b":" "})",
    R"({"big":123456789012345678901234567890})",
};

TEST(JsonPrefix, ReadsEveryObjectTheParserAccepts) {
    for (const std::string& d : kDocuments) {
        ASSERT_TRUE(parser_accepts_object(d)) << d;
        EXPECT_TRUE(reads_whole(d)) << d;
        // Every prefix is taken byte by byte; only the whole is complete.
        JsonPrefix p;
        for (size_t i = 0; i < d.size(); ++i) {
            ASSERT_TRUE(p.feed((uint8_t)d[i])) << d << " at " << i;
            if (i + 1 < d.size() && d.find_first_not_of(" \t\r\n", i + 1) != std::string::npos) {
                EXPECT_FALSE(p.complete()) << d << " at " << i;
            }
        }
    }
}

TEST(JsonPrefix, RefusesWhatTheParserRefuses) {
    for (const char* bad : {"[]",
                            "1",
                            "\"s\"",
                            "{,}",
                            "{\"a\"}",
                            "{\"a\":}",
                            "{\"a\":1,}",
                            "{\"a\":01}",
                            "{\"a\":1.}",
                            "{\"a\":.5}",
                            "{\"a\":-}",
                            "{\"a\":1e}",
                            "{\"a\":tru}",
                            "{\"a\":True}",
                            "{\"a\":\"\x01\"}",
                            "{\"a\":\"\\x\"}",
                            "{\"a\":\"\\u12G4\"}",
                            "{\"a\":\"\\uD800\"}",
                            "{\"a\":\"\\uDC00\"}",
                            "{\"a\":\"\\uD800\\n\"}",
                            "{\"a\":\"\xC0\x80\"}",
                            "{\"a\":\"\xED\xA0\x80\"}",
                            "{\"a\":\"\xF4\x90\x80\x80\"}",
                            "{\"a\":\"\xFF\"}",
                            "{\"a\":\"\xC3\"}",
                            "{\"a\":1}}",
                            "{\"a\":[1}",
                            "{} {}",
                            "{'a':1}",
                            "{\"a\":1e400}",
                            "{\"a\":-2.5E+123}"}) {
        EXPECT_FALSE(parser_accepts_object(bad)) << bad;
        EXPECT_FALSE(reads_whole(bad)) << bad;
    }
}

TEST(JsonPrefix, BoundsNumbersToFiniteDoubles) {
    EXPECT_TRUE(reads_whole("{\"a\":" + std::string(64, '7') + "e99}"));
    EXPECT_FALSE(reads_whole("{\"a\":" + std::string(65, '7') + "}"));
    EXPECT_TRUE(reads_whole("{\"a\":0." + std::string(300, '1') + "e-99}"));
    EXPECT_FALSE(reads_whole("{\"a\":1e100}"));
}

TEST(JsonPrefix, BoundsNestingAndBlankRuns) {
    JsonPrefix p;
    ASSERT_TRUE(p.feed(std::string_view("{\"a\":")));
    for (int d = 1; d < JsonPrefix::kMaxDepth; ++d) ASSERT_TRUE(p.feed('[')) << d;
    EXPECT_FALSE(p.feed('['));
    EXPECT_FALSE(p.feed('{'));
    JsonPrefix q;
    ASSERT_TRUE(q.feed('{'));
    ASSERT_TRUE(q.feed('\n'));
    EXPECT_FALSE(q.feed('\n'));  // one line break a run
    for (int i = 1; i < JsonPrefix::kMaxWhitespace; ++i) ASSERT_TRUE(q.feed(i % 2 ? ' ' : '\t'));
    EXPECT_FALSE(q.feed(' '));
    EXPECT_TRUE(q.feed('}'));  // the run ends with a character that is not blank
    EXPECT_TRUE(q.complete());
}

// Byte changes, insertions and deletions of the documents: the recognizer and the parser
// agree on each.
TEST(JsonPrefix, AgreesWithTheParserOnMutatedDocuments) {
    std::mt19937 rng(7);
    const std::string alphabet =
        "{}[]:,\" \n\\/-+.0123456789eEtrufalsn\xC3\xA9\xE2\x82\xAC\xF0\x9F\x01u";
    int agreed = 0;
    for (int round = 0; round < 100000; ++round) {
        std::string s = kDocuments[rng() % kDocuments.size()];
        const int edits = 1 + rng() % 3;
        for (int e = 0; e < edits && !s.empty(); ++e) {
            const size_t at = rng() % s.size();
            const char c = alphabet[rng() % alphabet.size()];
            switch (rng() % 3) {
                case 0:
                    s[at] = c;
                    break;
                case 1:
                    s.insert(s.begin() + (long)at, c);
                    break;
                default:
                    s.erase(at, 1);
            }
        }
        const bool ours = reads_whole(s), theirs = parser_accepts_object(s);
        ASSERT_EQ(ours, theirs) << "'" << s << "'";
        agreed += ours;
    }
    EXPECT_GT(agreed, 5000);  // the edits keep a share of the documents valid
}

// A vocabulary of the 256 bytes, multi-byte pieces (whole and cut UTF-8 among them), the turn's
// end and the thinking markers.
tokenizer::Tokenizer json_vocab() {
    using tokenizer::TokenType;
    tokenizer::Vocab v;
    v.kind = tokenizer::VocabKind::BPE;
    v.model = "gpt2";
    v.pre = "qwen2";
    for (unsigned b = 0; b < 256; ++b) v.tokens.push_back(tokenizer::test::byte_char(b));
    v.types.assign(256, TokenType::NORMAL);
    for (const char* t : {"{\"", "\":", "\",", "\"}", "true", "null", "12", ".5", "e-3", "ab",
                          " the", "\xC3\xA9t\xC3\xA9", "\xE2\x82", "\\n", "\\u00", "]}", "},{"}) {
        std::string bytes = t, text;
        for (unsigned char c : bytes) text += tokenizer::test::byte_char(c);
        v.tokens.push_back(text);
        v.types.push_back(TokenType::NORMAL);
    }
    v.tokens.push_back("<|im_end|>");
    v.types.push_back(TokenType::CONTROL);
    v.eos = (int32_t)v.tokens.size() - 1;
    for (const char* t : {"<think>", "</think>", "<tool_call>"}) {
        v.tokens.push_back(t);
        v.types.push_back(TokenType::USER_DEFINED);
    }
    return tokenizer::Tokenizer(std::move(v));
}

// Samples under a constraint from noisy logits (plus `lean` on some tokens) until the end of the
// turn or `steps` tokens; returns the text after the thinking block the prompt opened
// (`thinking`), and whether the turn ended.
std::string sample_under(const tokenizer::Tokenizer& tok, TokenConstraint& c, uint32_t seed,
                         int steps, bool thinking, bool* ended,
                         const std::vector<std::pair<int32_t, float>>& lean) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> noise(0.f, 2.f);
    SamplerParams sp;
    sp.temperature = 1.0f;
    sp.seed = seed;
    Sampler sampler(sp);
    std::string text;
    *ended = false;
    for (int step = 0; step < steps; ++step) {
        std::vector<float> logits((size_t)tok.n_vocab());
        for (float& l : logits) l = noise(rng);
        for (const auto& [id, by] : lean) logits[(size_t)id] += by;
        EXPECT_GT(c.mask(logits), 0);
        const int32_t t = sampler.sample(logits);
        EXPECT_TRUE(std::isfinite(logits[(size_t)t]));
        c.accept(t);
        if (tok.is_eog(t)) {
            *ended = true;
            break;
        }
        text += tok.token_text(t);
        if (thinking && text.find("</think>") != std::string::npos) {
            thinking = false;
            text.clear();
        }
    }
    return text;
}

// A JSON object sampled so that it ends within the budget (leaning towards closing); "" if the
// turn did not end.
std::string sample_json(const tokenizer::Tokenizer& tok, JsonConstraint& c, uint32_t seed,
                        bool thinking) {
    bool ended = false;
    const std::string text =
        sample_under(tok, c, seed, 3000, thinking, &ended,
                     {{'}', 4.f}, {']', 4.f}, {'"', 4.f}, {tok.find_token("</think>"), 2.f}});
    return ended ? text : "";
}

TEST(JsonConstraint, SampledTextIsAnObjectTheParserAccepts) {
    const tokenizer::Tokenizer tok = json_vocab();
    auto table = std::make_shared<const TokenTable>(tok);
    for (uint32_t seed = 1; seed <= 40; ++seed) {
        JsonConstraint c(table, ThinkBlock(false, false));
        const std::string text = sample_json(tok, c, seed, false);
        ASSERT_FALSE(text.empty()) << "seed " << seed;
        ASSERT_TRUE(nlohmann::json::accept(text)) << "seed " << seed << ": " << text;
        EXPECT_TRUE(nlohmann::json::parse(text).is_object()) << text;
        EXPECT_EQ(text.find("<think>"), std::string::npos) << text;
    }
}

TEST(JsonConstraint, TheEndOfTurnWaitsForTheObjectAndThenIsAllThatIsLeft) {
    const tokenizer::Tokenizer tok = json_vocab();
    auto table = std::make_shared<const TokenTable>(tok);
    JsonConstraint c(table, ThinkBlock(false, false));
    const int32_t eos = tok.eos(), brace = '{';
    std::vector<float> logits((size_t)tok.n_vocab(), 0.f);
    c.mask(logits);
    EXPECT_TRUE(std::isinf(logits[eos]));
    EXPECT_TRUE(std::isfinite(logits[brace]));
    EXPECT_TRUE(std::isfinite(logits[' ']));
    EXPECT_TRUE(std::isinf(logits['[']));  // an object, not any value
    c.accept(brace);
    c.accept('}');
    std::fill(logits.begin(), logits.end(), 0.f);
    EXPECT_EQ(c.mask(logits), 1);
    EXPECT_TRUE(std::isfinite(logits[eos]));
}

TEST(JsonConstraint, ReasoningComesFirstThenTheObject) {
    const tokenizer::Tokenizer tok = json_vocab();
    auto table = std::make_shared<const TokenTable>(tok);
    for (uint32_t seed = 1; seed <= 10; ++seed) {
        JsonConstraint c(table, ThinkBlock(true, true));  // the prompt opened <think>
        const std::string text = sample_json(tok, c, seed, true);
        ASSERT_FALSE(text.empty()) << "seed " << seed;
        EXPECT_TRUE(nlohmann::json::accept(text)) << text;
    }
    // Without the reasoning markers in play, <think> is never allowed.
    JsonConstraint plain(table, ThinkBlock(false, false));
    std::vector<float> logits((size_t)tok.n_vocab(), 0.f);
    plain.mask(logits);
    EXPECT_TRUE(std::isinf(logits[(size_t)tok.find_token("<think>")]));
    JsonConstraint thinking(table, ThinkBlock(true, false));
    std::fill(logits.begin(), logits.end(), 0.f);
    thinking.mask(logits);
    EXPECT_TRUE(std::isfinite(logits[(size_t)tok.find_token("<think>")]));
}

TEST(PrefixConstraint, TheOpeningComesFirstWhateverTheLogitsSay) {
    const tokenizer::Tokenizer tok = json_vocab();
    auto table = std::make_shared<const TokenTable>(tok);
    const std::string opening = "<tool_call>\n<function=get_weather>\n";
    // The model would rather stop at once, and end its thinking soon.
    const std::vector<std::pair<int32_t, float>> lean = {{tok.eos(), 6.f},
                                                         {tok.find_token("</think>"), 3.f}};
    for (uint32_t seed = 1; seed <= 20; ++seed) {
        PrefixConstraint c(table, ThinkBlock(false, false), {opening});
        bool ended = false;
        const std::string text = sample_under(tok, c, seed, 60, false, &ended, lean);
        EXPECT_TRUE(text.starts_with(opening)) << "seed " << seed << ": " << text;
        EXPECT_TRUE(ended) << "seed " << seed;  // free again once the opening is written
    }
    // After a thinking block the prompt opened.
    for (uint32_t seed = 1; seed <= 10; ++seed) {
        PrefixConstraint c(table, ThinkBlock(true, true), {opening});
        bool ended = false;
        const std::string text = sample_under(tok, c, seed, 3000, true, &ended, lean);
        EXPECT_TRUE(text.starts_with(opening)) << "seed " << seed << ": " << text;
    }
}

// With several openings (a forced call to any of the request's functions), the output opens with
// one of them, whole: a name that begins another ("get", "get_weather") is not left half written.
TEST(PrefixConstraint, TheOutputOpensWithOneOfSeveral) {
    const tokenizer::Tokenizer tok = json_vocab();
    auto table = std::make_shared<const TokenTable>(tok);
    const std::vector<std::string> openings = {"<tool_call>\n<function=get>\n",
                                               "<tool_call>\n<function=get_weather>\n",
                                               "<tool_call>\n<function=put>\n"};
    const std::vector<std::pair<int32_t, float>> lean = {{tok.eos(), 6.f}};
    int seen[3] = {};
    for (uint32_t seed = 1; seed <= 40; ++seed) {
        PrefixConstraint c(table, ThinkBlock(false, false), openings);
        bool ended = false;
        const std::string text = sample_under(tok, c, seed, 80, false, &ended, lean);
        int which = -1;
        for (int i = 0; i < 3; ++i)
            if (text.starts_with(openings[(size_t)i])) which = i;
        ASSERT_GE(which, 0) << "seed " << seed << ": " << text;
        ++seen[which];
    }
    EXPECT_GT(seen[0] + seen[1], 0);
    EXPECT_GT(seen[2], 0);
    // A prompt that closed the thinking block lets no other open before the call.
    std::vector<float> logits((size_t)tok.n_vocab(), 0.f);
    PrefixConstraint closed(table, ThinkBlock(false, false), openings);
    closed.mask(logits);
    EXPECT_TRUE(std::isinf(logits[(size_t)tok.find_token("<think>")]));
}

// logit_bias adds to the named tokens' logits (-100 rules one out), then hands the logits to the
// request's other rule, which still has the last word.
TEST(LogitBias, AddsThenLeavesTheRestToTheOtherRule) {
    std::vector<float> logits = {1.f, 2.f, 3.f, 4.f};
    LogitBias alone({{1, -100.f}, {2, 5.f}, {7, 1.f}}, nullptr);
    EXPECT_EQ(alone.mask(logits), 3);
    EXPECT_EQ(logits[0], 1.f);
    EXPECT_TRUE(std::isinf(logits[1]));
    EXPECT_EQ(logits[2], 8.f);
    const tokenizer::Tokenizer tok = json_vocab();
    auto table = std::make_shared<const TokenTable>(tok);
    auto inner = std::make_shared<PrefixConstraint>(table, ThinkBlock(false, false),
                                                    std::vector<std::string>{"{"});
    LogitBias biased({{'{', -100.f}, {'x', 50.f}}, inner);
    std::vector<float> all((size_t)tok.n_vocab(), 0.f);
    const int64_t kept = biased.mask(all);
    EXPECT_TRUE(std::isinf(all['{']));  // the bias ruled it out
    EXPECT_TRUE(std::isinf(all['x']));  // the opening rules it out
    // What is left: the longer tokens that open with '{', and nothing else.
    int64_t finite = 0;
    for (size_t id = 0; id < all.size(); ++id)
        if (std::isfinite(all[id])) {
            ++finite;
            EXPECT_TRUE(table->text((int32_t)id).starts_with("{")) << id;
        }
    EXPECT_EQ(kept, finite);
    EXPECT_GT(kept, 0);
}

TEST(PrefixConstraint, TheEndOfTurnWaitsForTheOpening) {
    const tokenizer::Tokenizer tok = json_vocab();
    auto table = std::make_shared<const TokenTable>(tok);
    PrefixConstraint c(table, ThinkBlock(false, false), {"{\"name\": \""});
    std::vector<float> logits((size_t)tok.n_vocab(), 0.f);
    // '{' and the token "{\"" continue it; nothing else does.
    EXPECT_EQ(c.mask(logits), 2);
    EXPECT_TRUE(std::isinf(logits[(size_t)tok.eos()]));
    EXPECT_TRUE(std::isfinite(logits['{']));
    c.accept('{');
    c.accept('"');
    std::fill(logits.begin(), logits.end(), 0.f);
    c.mask(logits);
    EXPECT_TRUE(std::isfinite(logits['n']));
    EXPECT_TRUE(std::isinf(logits['x']));
    for (char ch : std::string("name\": \"")) c.accept((unsigned char)ch);
    std::fill(logits.begin(), logits.end(), 0.f);
    EXPECT_EQ(c.mask(logits), tok.n_vocab());  // all free
}

// A schema as structured-output clients send it: nested objects, a required subset, an enum, an
// integer, a nullable string, an array of objects through a $ref, no other keys.
const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "mood": {"enum": ["happy", "sad", "hap"]},
    "nick": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "pets": {"type": "array", "items": {"$ref": "#/$defs/pet"}}
  },
  "required": ["name", "mood"],
  "additionalProperties": false,
  "$defs": {"pet": {"type": "object", "properties": {"kind": {"const": "cat"},
                                                     "legs": {"type": "number"}},
                    "required": ["kind"], "additionalProperties": false}}
})";

bool schema_reads(const std::shared_ptr<const JsonSchema>& schema, const std::string& text) {
    SchemaPrefix p(schema.get());
    return p.feed(text) && p.complete();
}

TEST(JsonSchema, AdmitsWhatTheSchemaAdmits) {
    const auto schema = JsonSchema::compile(nlohmann::json::parse(kPersonSchema));
    for (const char* ok : {
             R"({"name": "Ann", "mood": "happy"})",
             R"({"mood":"hap","name":"","age":-12})",
             R"({"name": "B", "mood": "sad", "nick": null, "pets": []})",
             R"({"name": "B", "mood": "sad", "nick": "bee",
                 "pets": [{"kind": "cat"}, {"legs": 3.5, "kind": "cat"}]})",
         })
        EXPECT_TRUE(schema_reads(schema, ok)) << ok;
    for (const char* bad : {
             R"({"name": "Ann"})",                               // mood is required
             R"({"name": "Ann", "mood": "happ"})",               // not one of the enum
             R"({"name": "Ann", "mood": "happy!"})",             // past the enum's value
             R"({"name": "Ann", "mood": "sad", "age": 1.5})",    // age is an integer
             R"({"name": "Ann", "mood": "sad", "age": "1"})",    // of type integer
             R"({"name": "Ann", "mood": "sad", "extra": 1})",    // no other keys
             R"({"name": "Ann", "name": "Bo", "mood": "sad"})",  // a key given twice
             R"({"name": 5, "mood": "sad"})",                    // name is a string
             R"({"name": "A", "mood": "sad", "nick": 3})",       // string or null
             R"({"name": "A", "mood": "sad", "pets": [{"kind": "dog"}]})",
             R"({"name": "A", "mood": "sad", "pets": [{}]})",  // kind is required
             R"({"name": "A", "mood": "sad", "pets": {}})",    // an array
         })
        EXPECT_FALSE(schema_reads(schema, bad)) << bad;
    // Refused at the first byte that leaves the schema, not later.
    SchemaPrefix p(schema.get());
    ASSERT_TRUE(p.feed(std::string_view(R"({"na)")));
    EXPECT_FALSE(p.feed('x'));
    EXPECT_TRUE(p.feed('m'));
    ASSERT_TRUE(p.feed(std::string_view(R"(e": "x", "mood": "s)")));
    EXPECT_FALSE(p.feed('x'));
}

TEST(JsonSchema, RefusesWhatItWouldNotEnforce) {
    for (const char* s : {
             R"({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}})",
             R"({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}})",
             R"({"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}})",
             R"({"type": "array", "items": {}})",         // not an object on top
             R"({"type": "object", "required": ["a"]})",  // a required key unlisted
             R"({"type": "object", "properties": {"a": {"enum": [1, 2]}}})",
             R"({"type": "object", "properties": {"a": {"anyOf": [{"type": "integer"},
                                                                   {"type": "number"}]}}})",
             R"({"type": "object", "properties": {"a": {"$ref": "#/$defs/none"}}})",
             R"({"type": "object", "properties": {"a": {"type": "decimal"}}})",
         }) {
        EXPECT_THROW(JsonSchema::compile(nlohmann::json::parse(s)), Error) << s;
    }
}

// A schema that no finite value satisfies is refused when compiled (the output would otherwise
// reach a point no byte can continue); recursion with a way to end is kept.
TEST(JsonSchema, RefusesWhatNoValueSatisfies) {
    for (const char* s : {
             R"({"$ref": "#"})",
             R"({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"},
                                                "b": {"$ref": "#/$defs/a"}}})",
             R"({"type": "object", "properties": {"x": {"type": []}}, "required": ["x"]})",
             R"({"type": "object", "properties": {"x": {"type": []}}})",
             R"({"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]})",
         }) {
        EXPECT_THROW(JsonSchema::compile(nlohmann::json::parse(s)), Error) << s;
    }
    for (
        const char* s : {
            R"({"type": "object", "properties": {"next": {"$ref": "#"}}})",
            R"({"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
                 "required": ["kids"]})",
        }) {
        EXPECT_NO_THROW(JsonSchema::compile(nlohmann::json::parse(s))) << s;
    }
}

// Sampled under the schema from random logits: every text that ended is an object the schema
// admits, checked here field by field.
TEST(JsonSchema, SampledTextKeepsToTheSchema) {
    const tokenizer::Tokenizer tok = json_vocab();
    auto table = std::make_shared<const TokenTable>(tok);
    const auto schema = JsonSchema::compile(nlohmann::json::parse(kPersonSchema));
    int ended = 0;
    for (uint32_t seed = 1; seed <= 40; ++seed) {
        JsonConstraint c(table, ThinkBlock(false, false), schema);
        const std::string text = sample_json(tok, c, seed, false);
        if (text.empty()) continue;
        ++ended;
        ASSERT_TRUE(nlohmann::json::accept(text)) << text;
        const nlohmann::json j = nlohmann::json::parse(text);
        ASSERT_TRUE(j.is_object()) << text;
        EXPECT_TRUE(j.contains("name") && j["name"].is_string()) << text;
        ASSERT_TRUE(j.contains("mood")) << text;
        const std::string mood = j["mood"];
        EXPECT_TRUE(mood == "happy" || mood == "sad" || mood == "hap") << text;
        if (j.contains("age")) {
            EXPECT_TRUE(j["age"].is_number_integer()) << text;
        }
        if (j.contains("nick")) {
            EXPECT_TRUE(j["nick"].is_string() || j["nick"].is_null()) << text;
        }
        for (const auto& [k, v] : j.items())
            EXPECT_TRUE(k == "name" || k == "age" || k == "mood" || k == "nick" || k == "pets")
                << text;
        if (j.contains("pets")) {
            ASSERT_TRUE(j["pets"].is_array()) << text;
            for (const auto& pet : j["pets"]) {
                EXPECT_EQ(pet.value("kind", ""), "cat") << text;
                if (pet.contains("legs")) {
                    EXPECT_TRUE(pet["legs"].is_number()) << text;
                }
                EXPECT_LE(pet.size(), 2u) << text;
            }
        }
    }
    EXPECT_GE(ended, 20);
}

}  // namespace
}  // namespace dl
