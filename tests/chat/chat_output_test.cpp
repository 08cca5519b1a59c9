// ChatOutputParser: generated text split into reasoning, content and tool calls, the same
// whichever way the text is cut into pieces.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/chat_output.h"

namespace dl {
namespace {

using ojson = nlohmann::ordered_json;

const ojson kTools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
    "days": {"type": "integer"}, "units": {"type": "object"}, "note": {"type": "string"}}}}}])");

ChatOutputFormat format(ToolCallSyntax syntax, bool reasoning = false, bool starts_in = false) {
    ChatOutputFormat f;
    f.tool_calls = syntax;
    f.reasoning = reasoning;
    f.starts_in_reasoning = starts_in;
    return f;
}

// The deltas of a whole stream, added up as a client adds them up.
struct Stream {
    std::string reasoning, content;
    ojson calls = ojson::array();
    ojson message;
    void add(const ChatDelta& d) {
        reasoning += d.reasoning_content;
        content += d.content;
        for (const ToolCallDelta& t : d.tool_calls) {
            while ((int)calls.size() <= t.index)
                calls.push_back({{"id", ""}, {"name", ""}, {"arguments", ""}});
            ojson& c = calls[t.index];
            c["id"] = c["id"].get<std::string>() + t.id;
            c["name"] = c["name"].get<std::string>() + t.name;
            c["arguments"] = c["arguments"].get<std::string>() + t.arguments;
        }
    }
};

Stream parse(const ChatOutputFormat& f, const std::vector<std::string>& pieces,
             const ojson& tools = kTools) {
    ChatOutputParser p(f, tools, "call_");
    Stream s;
    for (const std::string& piece : pieces) s.add(p.push(piece));
    ChatFinal fin = p.finish();
    s.add(fin.delta);
    s.message = fin.message;
    return s;
}

// The message from one push, checked against every cut into two pieces and against one byte a
// piece; the streamed deltas add up to the message.
ojson parse_every_way(const ChatOutputFormat& f, const std::string& text) {
    const Stream whole = parse(f, {text});
    std::vector<std::vector<std::string>> ways;
    for (size_t i = 0; i <= text.size(); ++i) ways.push_back({text.substr(0, i), text.substr(i)});
    std::vector<std::string> bytes;
    for (char c : text) bytes.push_back(std::string(1, c));
    ways.push_back(bytes);
    for (const auto& w : ways) {
        Stream s = parse(f, w);
        EXPECT_EQ(s.message, whole.message) << "cut after " << w[0].size() << " bytes";
        EXPECT_EQ(s.content, s.message["content"].is_null() ? "" : s.message["content"]);
        EXPECT_EQ(s.reasoning, s.message.value("reasoning_content", ""));
        ojson calls = ojson::array();
        for (const ojson& c : s.message.value("tool_calls", ojson::array()))
            calls.push_back({{"id", c["id"]},
                             {"name", c["function"]["name"]},
                             {"arguments", c["function"]["arguments"]}});
        EXPECT_EQ(s.calls, calls);
        if (::testing::Test::HasFailure()) break;
    }
    return whole.message;
}

TEST(ChatOutput, Qwen35XmlToolCallAfterReasoningOpenedByThePrompt) {
    const std::string text =
        "The user wants the weather.\n</think>\n\nLet me look.\n\n<tool_call>\n"
        "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
        "</parameter>\n<parameter=units>\n{\"t\": \"C\"}\n</parameter>\n<parameter=note>\n42\n"
        "</parameter>\n</function>\n</tool_call>";
    ojson m = parse_every_way(format(ToolCallSyntax::qwen_xml, true, true), text);
    EXPECT_EQ(m["reasoning_content"], "The user wants the weather.");
    EXPECT_EQ(m["content"], "Let me look.");
    ASSERT_EQ(m["tool_calls"].size(), 1u);
    EXPECT_EQ(m["tool_calls"][0]["id"], "call_0");
    EXPECT_EQ(m["tool_calls"][0]["type"], "function");
    EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
    // days is an integer and units an object by the schema; note stays the string "42".
    EXPECT_EQ(ojson::parse(m["tool_calls"][0]["function"]["arguments"].get<std::string>()),
              ojson::parse(R"({"city": "Paris", "days": 3, "units": {"t": "C"}, "note": "42"})"));
}

TEST(ChatOutput, Qwen35TwoCallsAndAValueThatIsNotJson) {
    const std::string text =
        "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n</function>"
        "\n</tool_call>\n<tool_call>\n<function=other>\n</function>\n</tool_call>";
    ojson m = parse_every_way(format(ToolCallSyntax::qwen_xml, true, false), text);
    EXPECT_TRUE(m["content"].is_null());
    ASSERT_EQ(m["tool_calls"].size(), 2u);
    EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"days": "three"})");
    EXPECT_EQ(m["tool_calls"][1]["id"], "call_1");
    EXPECT_EQ(m["tool_calls"][1]["function"]["name"], "other");
    EXPECT_EQ(m["tool_calls"][1]["function"]["arguments"], "{}");
}

TEST(ChatOutput, Qwen3ThinksThenCallsInJson) {
    const std::string text =
        "<think>\nhmm\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
        "{\"city\": \"Paris\"}}\n</tool_call>";
    ojson m = parse_every_way(format(ToolCallSyntax::json_in_tags, true), text);
    EXPECT_EQ(m["reasoning_content"], "hmm");
    EXPECT_TRUE(m["content"].is_null());
    ASSERT_EQ(m["tool_calls"].size(), 1u);
    EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris"})");
}

TEST(ChatOutput, Llama3JsonCallsAndPlainReplies) {
    const ChatOutputFormat f = format(ToolCallSyntax::llama3_json);
    ojson m = parse_every_way(f, R"( {"name": "get_weather", "parameters": {"city": "Paris"}})");
    ASSERT_EQ(m["tool_calls"].size(), 1u);
    EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris"})");

    m = parse_every_way(f, R"(<|python_tag|>{"name": "f", "parameters": {}})");
    ASSERT_EQ(m["tool_calls"].size(), 1u);
    EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "f");

    m = parse_every_way(f, "{not json} as a reply");
    EXPECT_EQ(m["content"], "{not json} as a reply");
    EXPECT_FALSE(m.contains("tool_calls"));
    m = parse_every_way(f, "Paris is {sunny}.");
    EXPECT_EQ(m["content"], "Paris is {sunny}.");
}

TEST(ChatOutput, APartialMarkerIsHeldBackNotEmitted) {
    ChatOutputParser p(format(ToolCallSyntax::json_in_tags), kTools, "call_");
    ChatDelta d = p.push("Sure <tool_");
    EXPECT_EQ(d.content, "Sure");
    d = p.push("call>\n{\"name\": \"f\", \"arguments\": {}}");
    EXPECT_TRUE(d.empty());
    d = p.push("\n</tool_call>");
    EXPECT_EQ(d.content, "");
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_EQ(d.tool_calls[0].name, "f");
    EXPECT_EQ(d.tool_calls[0].arguments, "{}");
    // A beginning that turns out not to be a marker is content after all.
    ChatOutputParser q(format(ToolCallSyntax::json_in_tags), kTools, "call_");
    EXPECT_EQ(q.push("a <tool").content, "a");
    EXPECT_EQ(q.push("box> b").content, " <toolbox> b");
}

TEST(ChatOutput, MalformedCallsComeBackAsTextAndCutOffCallsAreClosed) {
    ojson m =
        parse_every_way(format(ToolCallSyntax::json_in_tags), "x <tool_call>{oops}</tool_call> y");
    EXPECT_EQ(m["content"], "x<tool_call>{oops}</tool_call> y");
    EXPECT_FALSE(m.contains("tool_calls"));

    m = parse_every_way(format(ToolCallSyntax::qwen_xml),
                        "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar");
    ASSERT_EQ(m["tool_calls"].size(), 1u);
    EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"city": "Par"})");
}

TEST(ChatOutput, ReasoningOnlyWhereTheFormatHasIt) {
    ojson m = parse_every_way(format(ToolCallSyntax::none), "<think>x</think> y");
    EXPECT_EQ(m["content"], "<think>x</think> y");
    EXPECT_FALSE(m.contains("reasoning_content"));
    m = parse_every_way(format(ToolCallSyntax::none, true), "  <think>\nx\n</think>\n\n y \n");
    EXPECT_EQ(m["reasoning_content"], "x");
    EXPECT_EQ(m["content"], "y \n");  // the reply's own end kept
    // Thinking switched off in the prompt: the reply is content only.
    m = parse_every_way(format(ToolCallSyntax::none, true), "Answer: <think> is a tag.");
    EXPECT_EQ(m["content"], "Answer: <think> is a tag.");
    // A reply cut off while thinking.
    m = parse_every_way(format(ToolCallSyntax::none, true, true), "still thinking </thi");
    EXPECT_EQ(m["reasoning_content"], "still thinking </thi");
    EXPECT_EQ(m["content"], "");
}

std::string template_text(const char* name) {
    std::filesystem::path d =
        std::getenv("DELTALLM_TEST_DATA")
            ? std::filesystem::path(std::getenv("DELTALLM_TEST_DATA"))
            : std::filesystem::path(__FILE__).parent_path().parent_path() / "data";
    std::ifstream in(d / "templates" / name, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

TEST(ChatOutput, FormatFollowsTheTemplateAndThePrompt) {
    ChatOutputFormat f = ChatOutputFormat::detect(template_text("Qwen-Qwen3.5.jinja"), "qwen35",
                                                  "<|im_start|>assistant\n<think>\n");
    EXPECT_EQ(f.tool_calls, ToolCallSyntax::qwen_xml);
    EXPECT_TRUE(f.reasoning);
    EXPECT_TRUE(f.starts_in_reasoning);
    EXPECT_FALSE(f.reasoning_closed_by_prompt);
    f = ChatOutputFormat::detect(template_text("Qwen-Qwen3.5.jinja"), "qwen35",
                                 "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    EXPECT_FALSE(f.starts_in_reasoning);
    // Thinking switched off: a constraint lets no block open before its output.
    EXPECT_TRUE(f.reasoning_closed_by_prompt);
    EXPECT_FALSE(f.think_block().may_open("<think>", false));
    EXPECT_TRUE(ChatOutputFormat::detect(template_text("Qwen-Qwen3.5.jinja"), "qwen35",
                                         "<|im_start|>assistant\n")
                    .think_block()
                    .may_open("<think>", false));
    f = ChatOutputFormat::detect(template_text("Qwen-Qwen3-0.6B.jinja"), "qwen3",
                                 "<|im_start|>assistant\n");
    EXPECT_EQ(f.tool_calls, ToolCallSyntax::json_in_tags);
    EXPECT_TRUE(f.reasoning);
    EXPECT_FALSE(f.starts_in_reasoning);
    f = ChatOutputFormat::detect(template_text("meta-llama-Llama-3.2-3B-Instruct.jinja"), "llama");
    EXPECT_EQ(f.tool_calls, ToolCallSyntax::llama3_json);
    EXPECT_FALSE(f.reasoning);
    f = ChatOutputFormat::detect("{{ '<|im_start|>' }}", "qwen2");
    EXPECT_EQ(f.tool_calls, ToolCallSyntax::none);
}

}  // namespace
}  // namespace dl
