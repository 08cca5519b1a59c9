// Chat formats, written out by hand from the published ChatML and Llama-3 conventions.
#include "engine/chat.h"

namespace dl {

ChatFormat::ChatFormat(ChatStyle style, bool thinking_capable, bool opens_thinking)
    : style_(style), thinking_capable_(thinking_capable), opens_thinking_(opens_thinking) {}

ChatFormat ChatFormat::detect(const std::string& arch, const std::string& tmpl) {
    if (tmpl.find("<|start_header_id|>") != std::string::npos || (tmpl.empty() && arch == "llama"))
        return ChatFormat(ChatStyle::llama3);
    // Qwen3.5 family files are thinking models even when a converter left the template out.
    bool capable =
        tmpl.find("<think>") != std::string::npos || (tmpl.empty() && arch.rfind("qwen3", 0) == 0);
    // In the Jinja source the default generation prompt of Qwen3.5 is the literal '<think>\n';
    // Qwen3 only ever writes '<think>\n\n</think>\n\n' (to switch thinking off).
    bool opens = tmpl.find("'<think>\\n'") != std::string::npos ||
                 (tmpl.empty() && arch.rfind("qwen35", 0) == 0);
    return ChatFormat(ChatStyle::chatml, capable, opens);
}

std::string ChatFormat::end_of_turn() const {
    return style_ == ChatStyle::chatml ? "<|im_end|>" : "<|eot_id|>";
}

std::string ChatFormat::assistant_end() const {
    return style_ == ChatStyle::chatml ? "<|im_end|>\n" : "<|eot_id|>";
}

std::vector<ChatPiece> ChatFormat::message_pieces(const ChatMessage& m) const {
    if (style_ == ChatStyle::chatml)
        return {{"<|im_start|>" + m.role + "\n", true}, {m.content, false}, {"<|im_end|>\n", true}};
    return {{"<|start_header_id|>" + m.role + "<|end_header_id|>\n\n", true},
            {m.content, false},
            {"<|eot_id|>", true}};
}

std::string ChatFormat::message(const ChatMessage& m) const {
    std::string s;
    for (const ChatPiece& p : message_pieces(m)) s += p.text;
    return s;
}

std::string ChatFormat::assistant_prefix() const {
    if (style_ == ChatStyle::llama3) return "<|start_header_id|>assistant<|end_header_id|>\n\n";
    std::string s = "<|im_start|>assistant\n";
    if (!thinking_capable_) return s;
    switch (thinking_) {
        case Thinking::off:
            return s + "<think>\n\n</think>\n\n";
        case Thinking::on:
            return opens_thinking_ ? s + "<think>\n" : s;
        case Thinking::model_default:
            return opens_thinking_ ? s + "<think>\n" : s;
    }
    return s;
}

std::string ChatFormat::format(std::span<const ChatMessage> messages,
                               bool add_assistant_prefix) const {
    std::string s;
    for (const ChatMessage& m : messages) s += message(m);
    if (add_assistant_prefix) s += assistant_prefix();
    return s;
}

}  // namespace dl
