// Chat formats: how a conversation becomes the text a chat model was trained on. ChatML for the
// Qwen family (with Qwen3/Qwen3.5 thinking tags) and the Llama-3 header format. A session-keeping
// front-end appends one turn at a time (message() then assistant_prefix()), so the history is
// never formatted, tokenized or prefilled twice.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace dl {

enum class ChatStyle { chatml, llama3 };

// What the assistant prefix does about a thinking block.
enum class Thinking {
    model_default,  // as the model's template does when nothing is said
    on,             // let the model think (Qwen3.5 opens "<think>\n" for it)
    off,            // an empty thinking block, so the model answers directly
};

struct ChatMessage {
    std::string role;  // "system", "user", "assistant"
    std::string content;
};

// Part of a formatted conversation: the format's own markup, whose control-token text must become
// control tokens, or a message's content, which is tokenized as plain text whatever it holds (a
// user who types "<|im_end|>" must not be able to close the turn or write another role's).
struct ChatPiece {
    std::string text;
    bool markup = false;
};

class ChatFormat {
  public:
    // thinking_capable: the template knows <think> blocks; opens_thinking: its generation
    // prompt opens one by default (Qwen3.5) rather than leaving it to the model (Qwen3).
    explicit ChatFormat(ChatStyle style, bool thinking_capable = false,
                        bool opens_thinking = false);

    // Picks the format from general.architecture and the tokenizer.chat_template text (either
    // may be empty): a template with <|start_header_id|> or a llama architecture without a
    // template gives llama3; everything else ChatML.
    static ChatFormat detect(const std::string& arch, const std::string& chat_template);

    ChatStyle style() const { return style_; }
    bool thinking_capable() const { return thinking_capable_; }
    void set_thinking(Thinking t) { thinking_ = t; }

    // One whole message: header, content, end of turn (and ChatML's newline after it).
    std::string message(const ChatMessage& m) const;
    // The same message as markup, content, markup.
    std::vector<ChatPiece> message_pieces(const ChatMessage& m) const;
    // The header that makes the model speak as the assistant, with the thinking prefix.
    std::string assistant_prefix() const;
    // What closes an assistant turn: the model stops on the end-of-turn token without feeding it
    // back, so the next turn starts by appending this.
    std::string assistant_end() const;
    // The end-of-turn marker itself ("<|im_end|>", "<|eot_id|>").
    std::string end_of_turn() const;
    // A whole conversation, optionally followed by the assistant prefix. The beginning-of-text
    // token is not part of it: the tokenizer adds it when the vocabulary asks for one.
    std::string format(std::span<const ChatMessage> messages, bool add_assistant_prefix) const;

  private:
    ChatStyle style_;
    bool thinking_capable_;
    bool opens_thinking_;
    Thinking thinking_ = Thinking::model_default;
};

}  // namespace dl
