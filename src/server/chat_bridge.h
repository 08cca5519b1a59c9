// The one place where the server meets the chat formats: a request's messages rendered through
// the model's chat template (engine/chat_template.h) and the generated text split into content,
// reasoning and tool calls (engine/chat_output.h), both in OpenAI's JSON shapes.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "engine/chat_output.h"
#include "engine/chat_template.h"

namespace dl::server {

// One response's output: text in, OpenAI deltas out.
class ChatOutput {
  public:
    ChatOutput(ChatOutputFormat format, nlohmann::ordered_json tools);
    // The delta a piece of text adds: {"reasoning_content", "content", "tool_calls"} with only
    // the fields it has (an empty object when it adds nothing yet).
    nlohmann::ordered_json push(std::string_view text);
    // The last delta, and the whole assistant message.
    nlohmann::ordered_json finish(nlohmann::ordered_json& message);
    bool has_tool_calls() const { return tool_calls_; }
    const ChatOutputFormat& format() const { return format_; }

  private:
    ChatOutputFormat format_;
    nlohmann::ordered_json delta_json(const ChatDelta& d);
    ChatOutputParser parser_;
    bool tool_calls_ = false;
};

class ChatBridge {
  public:
    // template_source empty: the model's own template (or the built-in one for its family).
    ChatBridge(const tokenizer::Tokenizer& tok, const std::string& arch,
               const std::string& template_source);

    // The request's messages, tools (unless tool_choice is "none") and chat_template_kwargs
    // rendered and tokenized; ApiError 400 for bad messages or a template that refuses them.
    ChatPrompt prompt(const nlohmann::ordered_json& body) const;
    // ChatTemplater::next_turn_prefix of the request's messages and `reply` (an assistant
    // message as the response carries it); empty where it cannot be told.
    std::vector<int32_t> next_turn_prefix(const nlohmann::ordered_json& body,
                                          const nlohmann::ordered_json& reply) const;
    std::string render(const nlohmann::ordered_json& body) const;
    // The texts the output must open with one of when the request's tool_choice forces a call,
    // in the model's syntax up to and past the function's name: the named function's, or
    // ("required") each listed tool's; none otherwise. ApiError 400 when the template has no
    // tool-call syntax or does not show the model the tools.
    std::vector<std::string> tool_call_openings(const nlohmann::ordered_json& body,
                                                ToolCallSyntax syntax) const;
    std::unique_ptr<ChatOutput> output(const ChatPrompt& prompt,
                                       const nlohmann::ordered_json& body) const;
    const std::string& template_source() const { return templater_.source(); }

  private:
    struct ToolChoice {
        enum Mode { automatic, none, required, function } mode = automatic;
        std::string name;  // function: the tool it names
    };
    static ToolChoice tool_choice(const nlohmann::ordered_json& body);
    ChatRequest request(const nlohmann::ordered_json& body) const;
    ChatTemplater templater_;
};

}  // namespace dl::server
