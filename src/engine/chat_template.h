// A conversation rendered through the model's own Jinja chat template, as transformers'
// apply_chat_template does (context: messages, tools when there are any, add_generation_prompt,
// bos_token and eos_token as text, then the chat_template_kwargs), and tokenized so that only the
// template's own markup makes control tokens.
//
// Input is OpenAI's shape and is checked and normalised first (dl::Error with one sentence, an
// HTTP 400 for the server): roles are system, developer (rendered as system), user, assistant
// and tool; content is a string, null (assistant only; rendered as "") or an array of
// {type: "text", text} parts, joined with nothing between them as the templates that take parts
// join them; tool_calls[].function.arguments given as a JSON string is parsed into the object the
// templates expect (as llama-server does); reasoning_content is a string or null.
//
// Control tokens: every string the client sent (contents, reasoning, tool calls and their
// arguments, tool definitions, kwargs) is tokenized as text, whatever it holds; added tokens that
// are not control tokens (Qwen's <think>, <tool_call>) are matched in it as the tokenizer always
// matches them. chat_template.cpp says how. The template itself is trusted (it comes from the
// model file or the operator).
//
// A ChatTemplater keeps a reference to the tokenizer, which must outlive it; render() and
// prompt() may run on several threads at once.
//
// Beyond the API agreed for the server: ChatTemplater::arch(), builtin_template(), and the
// checks normalize_messages() / normalize_tools() on their own. The BOS token is in
// ChatPrompt::tokens once: the template's bos_token text when it writes one, else added where
// the vocabulary asks for it (tokenizer.ggml.add_bos_token).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "template/template.h"
#include "tokenizer/tokenizer.h"

namespace dl {

struct ChatRequest {
    // OpenAI shape: role, content (string or array of {type:"text",text}), tool_calls,
    // tool_call_id, reasoning_content
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    nlohmann::ordered_json tools;  // null or an array of OpenAI tool objects
    nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
    bool add_generation_prompt = true;
};

struct ChatPrompt {
    std::string text;             // the rendered prompt
    std::vector<int32_t> tokens;  // its tokens: only the template's own markup makes control tokens
    // Token count of the prompt before the last user message's turn (for the prefix cache), -1
    // if none: the longest token prefix this prompt shares with the rendering of the messages
    // before the last user message (without a generation prompt). -1 when there is no user
    // message, it is the first message, or the template refuses the shorter conversation.
    int64_t before_last_user = -1;
    // Token count of the prompt that the next turn's prompt shares, where that is not the whole
    // prompt (for the prefix cache): the template renders this turn's reply, once a user message
    // follows it, other than its generation prompt begins it (Qwen3 and Qwen3.5 open the reply
    // with '<think>' and drop it from history), so the snapshot at the prompt's end never serves
    // the next turn. -1 when the whole prompt is shared, or it cannot be told.
    int64_t before_reply = -1;
};

class ChatTemplater {
  public:
    // template_source empty: the tokenizer's tokenizer.chat_template; if that is empty too, a
    // built-in ChatML (or Llama-3 for llama) template text equivalent to engine/chat.h's formats.
    // dl::Error when the template does not parse.
    ChatTemplater(const tokenizer::Tokenizer& tok, std::string arch,
                  std::string template_source = {});
    ~ChatTemplater();

    const std::string& source() const { return source_; }
    const std::string& arch() const { return arch_; }
    // dl::Error with one sentence on bad messages or template errors.
    std::string render(const ChatRequest& r) const;
    ChatPrompt prompt(const ChatRequest& r) const;
    // The tokens every next turn's prompt begins with once the client sends `reply` (this turn's
    // answer as an assistant message: role, content and any tool_calls) back after r's messages
    // and a user message after it: the common beginning of two such renderings with different
    // user messages, less its last token (which a user message's first characters may merge
    // into). Empty where the template refuses such a conversation.
    std::vector<int32_t> next_turn_prefix(const ChatRequest& r,
                                          const nlohmann::ordered_json& reply) const;

    // The built-in template for an architecture (used when a file carries none).
    static std::string builtin_template(const std::string& arch);

  private:
    struct Escaper;
    struct Rendered {
        std::string text;
        std::vector<int32_t> tokens;
    };
    // The messages rendered and tokenized as a prompt (control tokens only from the template's
    // own markup; BOS first where the vocabulary adds one).
    Rendered build(const ChatRequest& r, const nlohmann::ordered_json& messages,
                   bool add_generation_prompt) const;
    std::string render_checked(const nlohmann::ordered_json& context, std::string* escaped) const;
    nlohmann::ordered_json context(const ChatRequest& r, const nlohmann::ordered_json& messages,
                                   bool add_generation_prompt) const;
    std::vector<int32_t> tokenize(const std::string& escaped) const;

    const tokenizer::Tokenizer& tok_;
    std::string arch_;
    std::string source_;
    tmpl::ChatTemplate template_;
    std::unique_ptr<Escaper> escaper_;
};

// The messages checked and normalised as described at the top (dl::Error on bad input).
nlohmann::ordered_json normalize_messages(const nlohmann::ordered_json& messages);
// The tools checked: null when there are none, else the array (dl::Error on a malformed tool).
nlohmann::ordered_json normalize_tools(const nlohmann::ordered_json& tools);

}  // namespace dl
