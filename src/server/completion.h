// One completion's answer, built from the scheduler's events: OpenAI's chat.completion or
// text_completion object, or the chunks that stream it. The text goes through the text stream
// (whole characters, stop strings) and, for a chat, the chat output parser (reasoning, content,
// tool calls); logprobs, finish reason and usage are added as OpenAI lays them out.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "server/chat_bridge.h"
#include "server/generation.h"
#include "server/request.h"
#include "tokenizer/tokenizer.h"

namespace dl::server {

class Completion {
  public:
    // output: the chat output parser (a chat), or null (a text completion).
    Completion(const tokenizer::Tokenizer& tok, std::string model, CompletionParams params,
               std::unique_ptr<ChatOutput> output);

    const CompletionParams& params() const { return params_; }
    bool is_chat() const { return output_ != nullptr; }
    // The chunk that opens a streamed chat (the assistant's role); none for a text completion.
    std::optional<nlohmann::ordered_json> opening_chunk() const;
    // Takes one event and returns the chunks it makes: text or deltas as they become safe to
    // send; on the last event the finish reason and, when asked, the usage. ApiError 500 when
    // generation failed.
    std::vector<nlohmann::ordered_json> on_event(const GenerationEvent& ev);
    // A stop string has ended the text: the request may be cancelled, the rest is dropped.
    bool stopped() const { return text_.stopped(); }
    bool finished() const { return finished_; }
    const GenerationEvent& done() const { return done_; }
    // The whole answer, after the last event.
    nlohmann::ordered_json response() const;
    // After the last event: OpenAI's finish_reason, and a chat's message (the response's).
    const std::string& finish_reason() const { return finish_reason_; }
    const nlohmann::ordered_json& message() const { return message_; }
    // The time the request took before the scheduler had it (its body read, its prompt rendered
    // and tokenized), for the timings.
    void set_prepare_seconds(double s) { prepare_seconds_ = s; }
    // After the last event, llama-server's timings object: prompt tokens prefilled (prompt_n) and
    // restored from the prefix cache (cache_n), generated tokens (predicted_n), the milliseconds
    // and rates of each; with queue_ms (waiting for a slot) and prepare_ms. The response and the
    // stream's finishing chunk carry it.
    nlohmann::ordered_json timings() const;

  private:
    using Json = nlohmann::ordered_json;
    // A token's entry; the completions API's carries the token's place in the text, `start`.
    Json logprob_entry(const GenerationEvent& ev, size_t start) const;
    Json logprobs_json(const Json& entries) const;
    Json chunk(Json delta_or_text, const Json& finish, Json logprobs) const;
    Json usage() const;
    int64_t completion_tokens() const;

    const tokenizer::Tokenizer& tok_;
    std::string model_;
    CompletionParams params_;
    std::unique_ptr<ChatOutput> output_;
    TextStream text_;
    std::string id_;
    int64_t created_;
    bool finished_ = false;

    std::string all_text_;           // a text completion's whole text
    Json message_;                   // a chat's final message
    Json logprobs_ = Json::array();  // every token's entry (the whole answer)
    // Entries not yet streamed, and where each token's text began (bytes of decoded text): an
    // entry is streamed once some of its token's text is.
    Json pending_ = Json::array();
    std::vector<size_t> pending_starts_;
    // Tokens taken into the answer: all that were generated, unless a stop string ended it, then
    // those up to the one that completed it (the scheduler may make one more before it stops).
    int64_t taken_ = 0;
    GenerationEvent done_;
    std::string finish_reason_;
    double prepare_seconds_ = 0;
};

}  // namespace dl::server
