// What a completion handler sends: tokens through the text stream (UTF-8, end-of-generation
// hidden, stop strings), and chats through the chat bridge (rendering, OpenAI's delta shapes).
#include <gtest/gtest.h>

#include "chat/chat_vocab.h"
#include "server/api_error.h"
#include "server/chat_bridge.h"
#include "server/generation.h"

namespace dl::server {
namespace {

using Json = nlohmann::ordered_json;

const tokenizer::Tokenizer& qwen_tokenizer() {
    static const tokenizer::Tokenizer tok(test::chat_vocab(false));
    return tok;
}

std::string stream_all(TextStream& s, const std::vector<int32_t>& ids) {
    std::string out;
    for (int32_t id : ids) out += s.push(id);
    return out + s.finish();
}

TEST(TextStream, HidesTheEndOfGenerationToken) {
    const auto& tok = qwen_tokenizer();
    TextStream s(tok, {}, true);
    EXPECT_EQ(stream_all(s, tok.encode("hi there<|im_end|>", false, true)), "hi there");
    TextStream shown(tok, {}, false);
    EXPECT_EQ(stream_all(shown, tok.encode("hi<|im_end|>", false, true)), "hi<|im_end|>");
}

TEST(TextStream, SendsWholeCharactersOnly) {
    const auto& tok = qwen_tokenizer();
    TextStream s(tok, {}, true);
    // Every byte is its own token here, so "é" arrives in two tokens.
    std::vector<int32_t> ids = tok.encode("caf\xc3\xa9", false, false);
    ASSERT_EQ(ids.size(), 5u);
    std::vector<std::string> sent;
    for (int32_t id : ids) sent.push_back(s.push(id));
    EXPECT_EQ(sent[3], "");
    EXPECT_EQ(sent[4], "\xc3\xa9");
}

TEST(TextStream, StopsAcrossTokensAndDropsTheRest) {
    const auto& tok = qwen_tokenizer();
    TextStream s(tok, {"STOP"}, true);
    std::string out;
    for (int32_t id : tok.encode("abc STOP def", false, false)) {
        out += s.push(id);
        EXPECT_EQ(out.find('S'), std::string::npos);
    }
    out += s.finish();
    EXPECT_EQ(out, "abc ");
    EXPECT_TRUE(s.stopped());
}

ChatOutputFormat qwen35_format() {
    ChatOutputFormat f;
    f.tool_calls = ToolCallSyntax::qwen_xml;
    f.reasoning = true;
    return f;
}

TEST(ChatOutput, DeltasCarryReasoningContentAndToolCallsInOpenAIsShape) {
    ChatOutput out(qwen35_format(), Json());
    Json all = Json::array();
    for (const char* piece : {"<think>\nplan", " it</think>\n\nHello", " there\n<tool_call>\n",
                              "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n",
                              "</function>\n</tool_call>"}) {
        Json d = out.push(piece);
        if (!d.empty()) all.push_back(d);
    }
    Json message;
    Json last = out.finish(message);
    if (!last.empty()) all.push_back(last);

    std::string reasoning, content, args;
    for (const Json& d : all) {
        reasoning += d.value("reasoning_content", "");
        content += d.value("content", "");
        if (d.contains("tool_calls"))
            for (const Json& c : d["tool_calls"]) {
                EXPECT_EQ(c["index"], 0);
                if (c.contains("id")) {
                    EXPECT_EQ(c["type"], "function");
                    EXPECT_EQ(c["function"]["name"], "get_weather");
                }
                args += c["function"]["arguments"].get<std::string>();
            }
    }
    EXPECT_EQ(reasoning, "plan it");
    EXPECT_EQ(content, "Hello there");
    EXPECT_EQ(Json::parse(args), Json({{"city", "Paris"}}));
    EXPECT_TRUE(out.has_tool_calls());
    EXPECT_EQ(message["role"], "assistant");
    EXPECT_EQ(message["reasoning_content"], "plan it");
    EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
}

TEST(ChatBridge, RendersAndTokenizesWithTheSnapshotBeforeTheLastUserTurn) {
    ChatBridge chat(qwen_tokenizer(), "qwen3", "");
    Json body = Json::parse(R"({"messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": [{"type": "text", "text": "and now?"}]}]})");
    ChatPrompt p = chat.prompt(body);
    EXPECT_EQ(p.text, chat.render(body));
    EXPECT_FALSE(p.tokens.empty());
    EXPECT_GT(p.before_last_user, 0);
    EXPECT_LT(p.before_last_user, (int64_t)p.tokens.size());
    EXPECT_NE(p.text.find("and now?"), std::string::npos);
}

TEST(ChatBridge, BadMessagesAndImpossibleToolChoicesAre400s) {
    ChatBridge chat(qwen_tokenizer(), "qwen3", "");
    for (const char* body :
         {R"({})", R"({"messages": {}})", R"({"messages": []})",
          R"({"messages": [{"role": "user"}], "tool_choice": "required"})",
          R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})",
          R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "always",
              "tools": [{"type": "function", "function": {"name": "f"}}]})",
          R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "function"},
              "tools": [{"type": "function", "function": {"name": "f"}}]})",
          R"({"messages": [{"role": "user", "content": "x"}],
              "tool_choice": {"type": "function", "function": {"name": "g"}},
              "tools": [{"type": "function", "function": {"name": "f"}}]})",
          R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": 3})",
          R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})",
          R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": 1})",
          R"({"messages": [{"role": 3, "content": "x"}]})"}) {
        try {
            chat.prompt(Json::parse(body));
            ADD_FAILURE() << "accepted " << body;
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status(), 400) << body;
        }
    }
}

// A forced tool call opens the output with the call's opening in the model's own syntax, past
// the function's name: the named function's, or for "required" each listed tool's; "auto" and
// "none" force nothing. A template that does not show the model its tools refuses a forced call.
TEST(ChatBridge, AForcedToolCallOpensInTheModelsSyntax) {
    ChatBridge chat(qwen_tokenizer(), "qwen3",
                    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                    "{% endfor %}{% if tools %}<tools>{{ tools | tojson }}</tools>\n{% endif %}"
                    "<|im_start|>assistant\n");
    auto body = [](const char* choice) {
        return Json::parse(std::string(R"({"messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "function", "function": {"name": "get_weather"}},
                      {"type": "function", "function": {"name": "get"}}],
            "tool_choice": )") +
                           choice + "}");
    };
    using V = std::vector<std::string>;
    const Json named = body(R"({"type": "function", "function": {"name": "get_weather"}})");
    EXPECT_EQ(chat.tool_call_openings(body(R"("required")"), ToolCallSyntax::qwen_xml),
              (V{"<tool_call>\n<function=get_weather>\n", "<tool_call>\n<function=get>\n"}));
    EXPECT_EQ(chat.tool_call_openings(body(R"("required")"), ToolCallSyntax::json_in_tags),
              (V{"<tool_call>\n{\"name\": \"get_weather\"", "<tool_call>\n{\"name\": \"get\""}));
    EXPECT_EQ(chat.tool_call_openings(named, ToolCallSyntax::qwen_xml),
              V{"<tool_call>\n<function=get_weather>\n"});
    EXPECT_EQ(chat.tool_call_openings(named, ToolCallSyntax::json_in_tags),
              V{"<tool_call>\n{\"name\": \"get_weather\""});
    EXPECT_EQ(chat.tool_call_openings(named, ToolCallSyntax::llama3_json),
              V{"{\"name\": \"get_weather\""});
    EXPECT_TRUE(chat.tool_call_openings(body(R"("auto")"), ToolCallSyntax::qwen_xml).empty());
    EXPECT_TRUE(chat.tool_call_openings(body(R"("none")"), ToolCallSyntax::qwen_xml).empty());
    EXPECT_THROW(chat.tool_call_openings(named, ToolCallSyntax::none), ApiError);
    ChatBridge blind(qwen_tokenizer(), "qwen3", "");  // the built-in ChatML shows no tools
    EXPECT_THROW(blind.tool_call_openings(named, ToolCallSyntax::qwen_xml), ApiError);
    EXPECT_TRUE(blind.tool_call_openings(body(R"("auto")"), ToolCallSyntax::qwen_xml).empty());
    // A name is written as JSON writes a string where the syntax is JSON.
    Json quoted = named;
    quoted["tools"][0]["function"]["name"] = quoted["tool_choice"]["function"]["name"] = "a\"b";
    EXPECT_EQ(chat.tool_call_openings(quoted, ToolCallSyntax::llama3_json),
              V{"{\"name\": \"a\\\"b\""});
    // The output parser reads the forced opening and what a model writes after it as one call.
    ChatOutputFormat f;
    f.tool_calls = ToolCallSyntax::qwen_xml;
    ChatOutputParser parser(f);
    parser.push(chat.tool_call_openings(named, ToolCallSyntax::qwen_xml)[0]);
    parser.push("<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>");
    const ChatFinal done = parser.finish();
    ASSERT_TRUE(done.message.contains("tool_calls")) << done.message.dump();
    EXPECT_EQ(done.message["tool_calls"][0]["function"]["name"], "get_weather");
}

TEST(ChatBridge, ATemplateThatRaisesIsA400) {
    ChatBridge chat(qwen_tokenizer(), "qwen3",
                    "{{ raise_exception('only user messages, please') }}");
    try {
        chat.prompt(Json::parse(R"({"messages": [{"role": "user", "content": "x"}]})"));
        ADD_FAILURE() << "accepted";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400);
        EXPECT_NE(std::string(e.what()).find("only user messages"), std::string::npos);
    }
}

}  // namespace
}  // namespace dl::server
