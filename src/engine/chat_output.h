// The model's generated text, as it streams, split into OpenAI's fields: reasoning (inside
// <think>...</think>) -> reasoning_content, tool calls in the model's own syntax -> tool_calls,
// the rest -> content.
//
// push() takes text pieces in any cut (a marker split across pieces is held back until it is
// whole, never emitted as content) and returns what each piece adds; finish() flushes what is
// held and returns the whole message. Tool-call markup never reaches content, except a call the
// model left malformed, which is given back as text. The whitespace around the reasoning, at the
// start of the content and before a tool call is dropped (it separates the parts; the templates
// drop it when they render them); the content's trailing whitespace is kept.
//
// Syntaxes: Qwen3.5 / Qwen3-Coder XML (<tool_call>\n<function=NAME>\n<parameter=ARG>\nvalue\n
// </parameter>\n</function>\n</tool_call>; each parameter streams as an arguments fragment once
// its value is complete), Qwen3 / Hermes JSON in tags (<tool_call>{"name", "arguments"}
// </tool_call>; one delta per call) and Llama 3.x JSON ({"name", "parameters"} as the whole reply,
// or after <|python_tag|>; known only at the end, so such a reply is held until finish()).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "engine/token_table.h"

namespace dl {

enum class ToolCallSyntax {
    none,
    qwen_xml,      // <tool_call><function=NAME><parameter=ARG>value</parameter>...
    json_in_tags,  // <tool_call>{"name": ..., "arguments": {...}}</tool_call>
    llama3_json,   // {"name": ..., "parameters": {...}}, optionally after <|python_tag|>
};

struct ChatOutputFormat {
    ToolCallSyntax tool_calls = ToolCallSyntax::none;
    bool reasoning = false;            // the model writes <think>...</think>
    bool starts_in_reasoning = false;  // the prompt opened <think>: the output begins inside it
    // The prompt ends with a closed block (thinking switched off: "<think>\n\n</think>\n\n"):
    // the reply is the answer, and a constraint lets no other block open.
    bool reasoning_closed_by_prompt = false;

    // From the chat template's source (the architecture when the source says nothing) and the
    // rendered prompt (whether it ends inside an open <think>, or after a closed one).
    static ChatOutputFormat detect(std::string_view template_source, std::string_view arch,
                                   std::string_view prompt = {});
    // The thinking block a constraint lets the model write before the output it shapes.
    ThinkBlock think_block() const {
        return ThinkBlock(reasoning && !reasoning_closed_by_prompt, starts_in_reasoning);
    }
};

struct ToolCallDelta {
    int index = 0;
    std::string id;         // on a call's first delta only
    std::string name;       // on a call's first delta only
    std::string arguments;  // a fragment of the arguments' JSON text
};

struct ChatDelta {
    std::string reasoning_content;
    std::string content;
    std::vector<ToolCallDelta> tool_calls;
    bool empty() const {
        return reasoning_content.empty() && content.empty() && tool_calls.empty();
    }
};

struct ChatFinal {
    ChatDelta delta;  // what finish() still added
    // {"role": "assistant", "content": string (null when empty and there are tool calls),
    //  "reasoning_content" (when any), "tool_calls": [{id, type: "function",
    //  function: {name, arguments: JSON text}}] (when any)}
    nlohmann::ordered_json message;
};

class ChatOutputParser {
  public:
    // tools: the request's tools (their parameter schemas type the XML values); id_prefix: the
    // tool-call ids are id_prefix + index (empty: "call_" and random characters).
    explicit ChatOutputParser(ChatOutputFormat format,
                              nlohmann::ordered_json tools = nlohmann::ordered_json(),
                              std::string id_prefix = {});

    ChatDelta push(std::string_view text);
    ChatFinal finish();

  private:
    enum class State { content, reasoning, tool_call, python_tag, maybe_json };
    enum class Xml { start, body, value, end, skip };
    struct Section {
        std::string held;  // trailing whitespace, emitted only if text follows
        bool started = false;
        std::string all;
        void add(std::string_view s, std::string& out);
        void add_held(std::string& out) {
            out += held;
            all += held;
            held.clear();
        }
        void end() { held.clear(); }
    };
    struct Call {
        std::string id, name, arguments;
    };

    void run(bool final, ChatDelta& d);
    bool step_content(bool final, ChatDelta& d);
    bool step_tool_call(bool final, ChatDelta& d);
    bool step_xml(bool final, ChatDelta& d);
    bool skip_call(bool final);
    void start_call(const std::string& name, ChatDelta& d);
    void add_arguments(const std::string& text, ChatDelta& d);
    void end_call();
    void malformed_call(ChatDelta& d);
    void finish_held(ChatDelta& d);
    nlohmann::ordered_json xml_value(const std::string& param, std::string value) const;

    ChatOutputFormat format_;
    nlohmann::ordered_json tools_;
    std::string id_prefix_;
    State state_;
    Xml xml_ = Xml::start;
    std::string buf_;       // text not yet decided on
    std::string raw_call_;  // the current call's text since <tool_call>
    std::string param_;     // the XML parameter being read
    int params_ = 0;
    bool call_open_ = false;  // the current call's name went out
    bool seen_tool_call_ = false;
    Section reasoning_, content_;
    std::vector<Call> calls_;
};

}  // namespace dl
