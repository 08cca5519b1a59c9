// Completion answers from synthetic generation events: OpenAI's objects and chunks, finish
// reasons, usage, logprobs, stop strings and tool calls.
#include <gtest/gtest.h>

#include "chat/chat_vocab.h"
#include "server/api_error.h"
#include "server/completion.h"

namespace dl::server {
namespace {

using Json = nlohmann::ordered_json;

const tokenizer::Tokenizer& tok() {
    static const tokenizer::Tokenizer t(test::chat_vocab(false));
    return t;
}

GenerationEvent token(int32_t id) {
    GenerationEvent e;
    e.token = id;
    return e;
}

GenerationEvent done(FinishReason why, int64_t prompt, int64_t generated, int64_t cached = 0) {
    GenerationEvent e;
    e.kind = GenerationEvent::Kind::done;
    e.finish = why;
    e.prompt_tokens = prompt;
    e.generated_tokens = generated;
    e.cached_tokens = cached;
    return e;
}

// Feeds the tokens of `text` (control tokens parsed) and the done event; returns every chunk.
std::vector<Json> feed(Completion& c, const std::string& text, FinishReason why) {
    std::vector<Json> chunks;
    const std::vector<int32_t> ids = tok().encode(text, false, true);
    for (int32_t id : ids) {
        for (Json& j : c.on_event(token(id))) chunks.push_back(j);
        if (c.stopped()) break;
    }
    for (Json& j : c.on_event(done(why, 11, (int64_t)ids.size(), 4))) chunks.push_back(j);
    return chunks;
}

std::unique_ptr<ChatOutput> plain_chat() {
    return std::make_unique<ChatOutput>(ChatOutputFormat{}, Json());
}

TEST(Completion, TextCompletionAnswersWholeWithUsage) {
    Completion c(tok(), "m", CompletionParams{}, nullptr);
    EXPECT_FALSE(c.opening_chunk());
    feed(c, "hello world", FinishReason::length);
    Json r = c.response();
    EXPECT_EQ(r["object"], "text_completion");
    EXPECT_EQ(r["model"], "m");
    EXPECT_EQ(r["choices"][0]["text"], "hello world");
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
    EXPECT_TRUE(r["choices"][0]["logprobs"].is_null());
    EXPECT_EQ(r["usage"]["prompt_tokens"], 11);
    EXPECT_EQ(r["usage"]["completion_tokens"], 11);
    EXPECT_EQ(r["usage"]["total_tokens"], 22);
    EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
}

TEST(Completion, ChatStreamsRoleDeltasFinishAndUsage) {
    CompletionParams p;
    p.stream = p.include_usage = true;
    Completion c(tok(), "m", p, plain_chat());
    Json opening = *c.opening_chunk();
    EXPECT_EQ(opening["object"], "chat.completion.chunk");
    EXPECT_EQ(opening["choices"][0]["delta"]["role"], "assistant");
    std::vector<Json> chunks = feed(c, "Hi there<|im_end|>", FinishReason::eog);
    ASSERT_GE(chunks.size(), 3u);
    std::string content;
    for (size_t i = 0; i + 2 < chunks.size(); ++i) {
        EXPECT_EQ(chunks[i]["id"], opening["id"]);
        EXPECT_TRUE(chunks[i]["choices"][0]["finish_reason"].is_null());
        EXPECT_TRUE(chunks[i]["usage"].is_null());
        content += chunks[i]["choices"][0]["delta"].value("content", "");
    }
    EXPECT_EQ(content, "Hi there");  // the end-of-turn token is not text
    const Json& finish = chunks[chunks.size() - 2];
    EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(finish["choices"][0]["delta"], Json::object());
    const Json& usage = chunks.back();
    EXPECT_EQ(usage["choices"], Json::array());
    EXPECT_EQ(usage["usage"]["completion_tokens"], 9);
    EXPECT_EQ(c.response()["choices"][0]["message"]["content"], "Hi there");
}

TEST(Completion, AStopStringEndsTheTextWithFinishStop) {
    CompletionParams p;
    p.stop = {"STOP"};
    Completion c(tok(), "m", p, plain_chat());
    std::vector<Json> chunks = feed(c, "abc STOP def", FinishReason::cancelled);
    EXPECT_TRUE(c.stopped());
    std::string content;
    for (const Json& j : chunks) content += j["choices"][0]["delta"].value("content", "");
    EXPECT_EQ(content, "abc ");  // the text up to the stop string, its space included
    EXPECT_EQ(c.response()["choices"][0]["finish_reason"], "stop");
}

TEST(Completion, LogprobsFollowEachApisShape) {
    CompletionParams p;
    p.top_logprobs = 2;
    auto event = [](int32_t id) {
        GenerationEvent e = token(id);
        e.logprob = -0.5f;
        e.top = {{id, -0.5f}, {(int32_t)'z', -1.5f}};
        return e;
    };
    Completion chat(tok(), "m", p, plain_chat());
    chat.on_event(event('a'));
    chat.on_event(event('b'));
    chat.on_event(done(FinishReason::length, 3, 2));
    Json lp = chat.response()["choices"][0]["logprobs"]["content"];
    ASSERT_EQ(lp.size(), 2u);
    EXPECT_EQ(lp[1]["token"], "b");
    EXPECT_EQ(lp[1]["bytes"], Json::array({98}));
    EXPECT_EQ(lp[1]["top_logprobs"][1]["token"], "z");

    Completion text(tok(), "m", p, nullptr);
    text.on_event(event('a'));
    text.on_event(event('b'));
    text.on_event(done(FinishReason::length, 3, 2));
    Json t = text.response()["choices"][0]["logprobs"];
    EXPECT_EQ(t["tokens"], Json::array({"a", "b"}));
    EXPECT_EQ(t["text_offset"], Json::array({0, 1}));
    EXPECT_EQ(t["top_logprobs"][0]["z"], -1.5f);
}

// A stop string spread over several tokens, and a token the scheduler made before the stop took
// effect: the usage counts the tokens up to the one that completed the stop, the logprobs hold
// none of the stop string's tokens, and the streamed entries are the answer's, each sent once some
// of its token's text was.
TEST(Completion, AStopStringsTokensAreNotInTheLogprobsOrTheUsage) {
    for (bool chat : {true, false}) {
        CompletionParams p;
        p.stop = {"STOP"};
        p.top_logprobs = 0;
        Completion c(tok(), "m", p, chat ? plain_chat() : nullptr);
        const std::vector<int32_t> ids = tok().encode("ab STOPx", false, false);
        ASSERT_EQ(ids.size(), 8u);  // a token a character in this vocabulary
        std::vector<Json> chunks;
        for (int32_t id : ids) {
            GenerationEvent e = token(id);
            e.logprob = -1.f;
            for (Json& j : c.on_event(e)) chunks.push_back(j);
        }
        for (Json& j : c.on_event(done(FinishReason::cancelled, 5, (int64_t)ids.size())))
            chunks.push_back(j);
        const Json r = c.response();
        EXPECT_EQ(r["usage"]["completion_tokens"], 7) << chat;  // "ab STOP", not the x
        EXPECT_EQ(r["timings"]["predicted_n"], 7) << chat;
        Json streamed = Json::array();
        for (const Json& j : chunks) {
            const Json& lp = j["choices"][0]["logprobs"];
            if (lp.is_null()) continue;
            for (const Json& e : chat ? lp["content"] : lp["tokens"]) streamed.push_back(e);
        }
        const Json& lp = r["choices"][0]["logprobs"];
        if (chat) {
            ASSERT_EQ(lp["content"].size(), 3u);  // "a", "b", " "
            EXPECT_EQ(lp["content"][2]["token"], " ");
            EXPECT_EQ(streamed, lp["content"]);
        } else {
            EXPECT_EQ(r["choices"][0]["text"], "ab ");
            EXPECT_EQ(lp["tokens"], Json::array({"a", "b", " "}));
            EXPECT_EQ(lp["text_offset"], Json::array({0, 1, 2}));
            EXPECT_EQ(streamed, lp["tokens"]);
        }
    }
}

TEST(Completion, ToolCallsFinishWithToolCalls) {
    ChatOutputFormat f;
    f.tool_calls = ToolCallSyntax::json_in_tags;
    Completion c(tok(), "m", CompletionParams{}, std::make_unique<ChatOutput>(f, Json()));
    feed(c, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>",
         FinishReason::eog);
    Json r = c.response();
    EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
    EXPECT_EQ(r["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "f");
    EXPECT_TRUE(r["choices"][0]["message"]["content"].is_null());
}

TEST(Completion, AFailedGenerationIsAServerError) {
    Completion c(tok(), "m", CompletionParams{}, plain_chat());
    GenerationEvent e = done(FinishReason::error, 1, 0);
    e.error = "device lost";
    try {
        c.on_event(e);
        ADD_FAILURE() << "no error";
    } catch (const ApiError& err) {
        EXPECT_EQ(err.status(), 500);
        EXPECT_NE(std::string(err.what()).find("device lost"), std::string::npos);
    }
}

TEST(Completion, TimingsSplitThePromptFromTheCacheAndTheGeneration) {
    CompletionParams p;
    p.stream = true;
    Completion c(tok(), "m", p, plain_chat());
    c.set_prepare_seconds(0.003);
    c.on_event(token(tok().encode("a", false, false)[0]));
    GenerationEvent d = done(FinishReason::length, 11, 5, 4);
    d.queue_seconds = 0.010;
    d.first_token_seconds = 0.050;
    d.total_seconds = 0.150;
    std::vector<Json> chunks = c.on_event(d);
    ASSERT_FALSE(chunks.empty());
    const Json& finish = chunks.back();
    EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
    ASSERT_TRUE(finish.contains("timings"));
    const Json t = finish["timings"];
    EXPECT_EQ(t, c.response()["timings"]);
    EXPECT_EQ(t["cache_n"], 4);
    EXPECT_EQ(t["prompt_n"], 7);  // 11 in the prompt, 4 of them from the cache
    EXPECT_NEAR(t["prompt_ms"].get<double>(), 40.0, 1e-9);  // first step to first token
    EXPECT_NEAR(t["prompt_per_second"].get<double>(), 175.0, 1e-9);
    EXPECT_EQ(t["predicted_n"], 5);
    EXPECT_NEAR(t["predicted_ms"].get<double>(), 100.0, 1e-9);
    EXPECT_NEAR(t["predicted_per_token_ms"].get<double>(), 20.0, 1e-9);
    EXPECT_NEAR(t["queue_ms"].get<double>(), 10.0, 1e-9);
    EXPECT_NEAR(t["prepare_ms"].get<double>(), 3.0, 1e-9);
}

TEST(Completion, TimingsOfARequestCutBeforeItsFirstTokenAreZero) {
    Completion c(tok(), "m", CompletionParams{}, nullptr);
    GenerationEvent d = done(FinishReason::cancelled, 11, 0, 0);
    d.queue_seconds = 0.5;
    d.total_seconds = 0.7;
    c.on_event(d);
    const Json t = c.response()["timings"];
    EXPECT_EQ(t["predicted_n"], 0);
    EXPECT_EQ(t["prompt_ms"], 0.0);
    EXPECT_EQ(t["predicted_ms"], 0.0);
    EXPECT_EQ(t["predicted_per_second"], 0.0);
    EXPECT_NEAR(t["queue_ms"].get<double>(), 500.0, 1e-9);
}

}  // namespace
}  // namespace dl::server
