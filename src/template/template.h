// Chat templates: renders a model's Jinja chat template (tokenizer.chat_template) the way
// Hugging Face transformers' apply_chat_template does with Python's jinja2, in our own
// interpreter. The context is a JSON object: messages, tools, add_generation_prompt,
// bos_token, eos_token and any extra keyword (enable_thinking, ...); parse it with
// nlohmann::ordered_json so that tojson writes keys in the order they came.
//
// Undefined names behave as jinja2's default Undefined: they print as nothing, iterate as
// empty, test false, and a missing key of a dict is undefined, but an attribute or item of an
// undefined value is an error (as in jinja2). Known differences from jinja2: integers are
// int64 (past it, an error), \N{name} escapes and recursive loops are not supported, and
// functions print as "<function>". A parsed ChatTemplate may render on several threads at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dl::tmpl {

struct Node;

// Bounds that keep a hostile template from hanging or exhausting memory: past one, rendering
// stops with a dl::Error that names the limit.
struct Limits {
    size_t max_output_bytes = size_t(16) << 20;  // also caps any one string a template builds
    uint64_t max_loop_iterations = 1'000'000;    // over all loops of one rendering
    int max_call_depth = 64;                     // nested macro calls
};

struct RenderOptions {
    Limits limits;
    // strftime_now() formats this time (seconds since the epoch, UTC) instead of the local
    // clock, so that a rendering can be repeated exactly.
    std::optional<int64_t> now;
};

// The error a template raises itself through raise_exception(message): what() is the message.
class RaisedError : public Error {
  public:
    explicit RaisedError(const std::string& what) : Error(what) {}
};

class ChatTemplate {
  public:
    // Parses the template; dl::Error naming the line of a syntax error.
    explicit ChatTemplate(std::string_view source);
    ~ChatTemplate();
    ChatTemplate(ChatTemplate&&) noexcept;
    ChatTemplate& operator=(ChatTemplate&&) noexcept;

    // dl::Error with one sentence for a failure while rendering (with its line), a limit, or
    // RaisedError for the template's own raise_exception.
    std::string render(const nlohmann::ordered_json& context,
                       const RenderOptions& options = {}) const;

  private:
    struct Parsed;
    std::unique_ptr<Parsed> parsed_;
};

// Parse and render in one call.
std::string render(std::string_view source, const nlohmann::ordered_json& context,
                   const RenderOptions& options = {});

}  // namespace dl::tmpl
