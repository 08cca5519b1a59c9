// Request bodies: JSON that is malformed, too deep or not an object, and every shared field's
// type and range, each refused with a 400 naming the field.
#include <gtest/gtest.h>

#include <string>

#include "server/api_error.h"
#include "server/request.h"

namespace dl::server {
namespace {

using Json = nlohmann::ordered_json;

// The status and message of the ApiError the body's parameters raise (0 and "" for none).
std::pair<int, std::string> refusal(const std::string& body, bool chat = true) {
    try {
        parse_completion_params(parse_body(body), chat, 4096, 1000, 7);
    } catch (const ApiError& e) {
        return {e.status(), e.what()};
    }
    return {0, ""};
}

TEST(RequestBody, MalformedJsonIsA400ThatSaysWhere) {
    auto [status, msg] = refusal("{\"messages\": [");
    EXPECT_EQ(status, 400);
    EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
}

TEST(RequestBody, MustBeAnObject) {
    EXPECT_EQ(refusal("[1, 2]").first, 400);
    EXPECT_EQ(refusal("\"text\"").first, 400);
    EXPECT_EQ(refusal("").first, 400);
}

TEST(RequestBody, DeepNestingIsRefusedBeforeAnythingWalksIt) {
    std::string deep = "{\"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
    auto [status, msg] = refusal(deep);
    EXPECT_EQ(status, 400);
    EXPECT_NE(msg.find("deeper"), std::string::npos) << msg;
    std::string ok = "{\"x\": " + std::string(30, '[') + std::string(30, ']') + "}";
    EXPECT_EQ(refusal(ok).first, 0);
}

TEST(RequestFields, DefaultsWhenAbsent) {
    CompletionParams p = parse_completion_params(parse_body("{}"), true, 4096, 1000, 99);
    EXPECT_EQ(p.max_tokens, -1);
    EXPECT_EQ(p.sampling.seed, 99u);
    EXPECT_FALSE(p.stream);
    EXPECT_EQ(p.top_logprobs, -1);
}

TEST(RequestFields, ReadsTheSamplingFields) {
    CompletionParams p = parse_completion_params(
        parse_body(R"({"temperature": 0, "top_p": 0.5, "top_k": 7, "min_p": 0.1, "seed": 42,
                      "repetition_penalty": 1.3, "max_completion_tokens": 12,
                      "stop": ["a", "b"], "stream": true,
                      "stream_options": {"include_usage": true},
                      "logprobs": true, "top_logprobs": 3})"),
        true, 4096, 1000, 1);
    EXPECT_EQ(p.sampling.temperature, 0.0f);
    EXPECT_EQ(p.sampling.top_p, 0.5f);
    EXPECT_EQ(p.sampling.top_k, 7);
    EXPECT_FLOAT_EQ(p.sampling.min_p, 0.1f);
    EXPECT_EQ(p.sampling.seed, 42u);
    EXPECT_FLOAT_EQ(p.sampling.repeat_penalty, 1.3f);
    EXPECT_EQ(p.max_tokens, 12);
    EXPECT_EQ(p.stop, (std::vector<std::string>{"a", "b"}));
    EXPECT_TRUE(p.stream);
    EXPECT_TRUE(p.include_usage);
    EXPECT_EQ(p.top_logprobs, 3);
}

TEST(RequestFields, WrongTypesAre400sNamingTheField) {
    for (const char* body :
         {R"({"temperature": "hot"})", R"({"max_tokens": "10"})", R"({"max_tokens": 1.5})",
          R"({"stream": 1})", R"({"stop": 5})", R"({"stop": ["a", 1]})", R"({"seed": "x"})",
          R"({"top_k": true})", R"({"stream_options": []})", R"({"logprobs": 2})"}) {
        auto [status, msg] = refusal(body);
        EXPECT_EQ(status, 400) << body;
        EXPECT_NE(msg.find('\''), std::string::npos) << body << ": " << msg;
    }
}

TEST(RequestFields, MaxTokensMustBePositiveAndFitTheContext) {
    EXPECT_EQ(refusal(R"({"max_tokens": 0})").first, 400);
    EXPECT_EQ(refusal(R"({"max_tokens": -5})").first, 400);
    auto [status, msg] = refusal(R"({"max_tokens": 100000000000})");
    EXPECT_EQ(status, 400);
    EXPECT_NE(msg.find("4096"), std::string::npos) << msg;
    EXPECT_EQ(refusal(R"({"max_tokens": 1e300})").first, 400);
    EXPECT_EQ(refusal(R"({"max_tokens": 18446744073709551615})").first, 400);
    EXPECT_EQ(refusal(R"({"max_tokens": 4096})").first, 0);
}

TEST(RequestFields, RangesAreChecked) {
    EXPECT_EQ(refusal(R"({"temperature": -1})").first, 400);
    EXPECT_EQ(refusal(R"({"top_p": 1.5})").first, 400);
    EXPECT_EQ(refusal(R"({"top_logprobs": 50, "logprobs": true})").first, 400);
    EXPECT_EQ(refusal(R"({"top_logprobs": 2})").first, 400);  // without logprobs
}

TEST(RequestFields, UnsupportedFeaturesSaySo) {
    auto n = refusal(R"({"n": 2})");
    EXPECT_EQ(n.first, 400);
    EXPECT_NE(n.second.find("'n'"), std::string::npos);
    auto rf = refusal(R"({"response_format": {"type": "grammar", "grammar": "x"}})");
    EXPECT_EQ(rf.first, 400);
    EXPECT_NE(rf.second.find("not supported"), std::string::npos);
    EXPECT_EQ(refusal(R"({"response_format": "json"})").first, 400);
    EXPECT_EQ(refusal(R"({"response_format": {"type": "json_schema"}})").first, 400);
    const CompletionParams js = parse_completion_params(
        parse_body(
            R"({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}})"),
        true, 64, 1000, 1);
    EXPECT_TRUE(js.json_object);
    EXPECT_TRUE(js.json_schema.is_object());
    EXPECT_TRUE(
        parse_completion_params(parse_body(R"({"response_format": {"type": "json_object"}})"), true,
                                64, 1000, 1)
            .json_object);
    EXPECT_EQ(refusal(R"({"presence_penalty": 2.5})").first, 400);  // OpenAI's range is -2..2
    EXPECT_EQ(refusal(R"({"frequency_penalty": 0, "presence_penalty": 0, "n": 1})").first, 0);
    EXPECT_EQ(refusal(R"({"response_format": {"type": "text"}})").first, 0);
}

// logit_bias: token ids of the vocabulary (as JSON's string keys) to numbers from -100 to 100;
// OpenAI's fields the server does not need are still checked for their types.
TEST(RequestFields, LogitBiasAndTheOtherOpenAIFields) {
    const CompletionParams p = parse_completion_params(
        parse_body(R"({"logit_bias": {"5": -100, "999": 2.5}})"), true, 64, 1000, 1);
    ASSERT_EQ(p.logit_bias.size(), 2u);
    EXPECT_EQ(p.logit_bias[0], (std::pair<int32_t, float>{5, -100.f}));
    EXPECT_EQ(p.logit_bias[1], (std::pair<int32_t, float>{999, 2.5f}));
    for (const char* bad :
         {R"({"logit_bias": [1, 2]})", R"({"logit_bias": {"abc": 5}})",
          R"({"logit_bias": {"5": "x"}})", R"({"logit_bias": {"1000": 1}})",
          R"({"logit_bias": {"-1": 1}})", R"({"logit_bias": {"5": 101}})",
          R"({"logit_bias": {"99999999999": 1}})", R"({"parallel_tool_calls": "x"})",
          R"({"reasoning_effort": 5})", R"({"user": {}})"})
        EXPECT_EQ(refusal(bad).first, 400) << bad;
    EXPECT_EQ(
        refusal(R"({"parallel_tool_calls": false, "user": "u", "reasoning_effort": "low"})").first,
        0);
}

TEST(RequestFields, CompletionsTakeLogprobsAsACount) {
    CompletionParams p =
        parse_completion_params(parse_body(R"({"logprobs": 2})"), false, 64, 1000, 1);
    EXPECT_EQ(p.top_logprobs, 2);
    EXPECT_EQ(refusal(R"({"logprobs": 99})", false).first, 400);
}

TEST(ErrorBody, HasOpenAIsShape) {
    nlohmann::json e = error_body(401, "bad key");
    EXPECT_EQ(e["error"]["message"], "bad key");
    EXPECT_EQ(e["error"]["type"], "authentication_error");
    EXPECT_EQ(e["error"]["code"], 401);
    EXPECT_EQ(error_body(404, "x")["error"]["type"], "invalid_request_error");
    EXPECT_EQ(error_body(503, "x")["error"]["type"], "unavailable_error");
    EXPECT_EQ(error_body(500, "x")["error"]["type"], "server_error");
}

}  // namespace
}  // namespace dl::server
