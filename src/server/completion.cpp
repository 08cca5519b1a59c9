// OpenAI's completion objects and chunks from generation events (see completion.h).
#include "server/completion.h"

#include <algorithm>
#include <ctime>
#include <random>

#include "server/api_error.h"

namespace dl::server {

using Json = nlohmann::ordered_json;

namespace {

std::string random_id(const char* prefix) {
    static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::string s = prefix;
    for (int i = 0; i < 24; ++i) s += kChars[rng() % (sizeof kChars - 1)];
    return s;
}

Json token_bytes(const std::string& s) {
    Json b = Json::array();
    for (unsigned char c : s) b.push_back((int)c);
    return b;
}

}  // namespace

Completion::Completion(const tokenizer::Tokenizer& tok, std::string model, CompletionParams params,
                       std::unique_ptr<ChatOutput> output)
    : tok_(tok),
      model_(std::move(model)),
      params_(std::move(params)),
      output_(std::move(output)),
      text_(tok, params_.stop, !params_.ignore_eos),
      id_(random_id(output_ ? "chatcmpl-" : "cmpl-")),
      created_((int64_t)std::time(nullptr)) {}

std::optional<Json> Completion::opening_chunk() const {
    if (!output_) return std::nullopt;
    return chunk(Json{{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
}

Json Completion::logprob_entry(const GenerationEvent& ev, size_t start) const {
    const std::string piece = tok_.token_text(ev.token);
    if (output_) {
        Json e;
        e["token"] = piece;
        e["logprob"] = ev.logprob;
        e["bytes"] = token_bytes(piece);
        Json top = Json::array();
        for (const TokenLogprob& t : ev.top) {
            const std::string p = tok_.token_text(t.token);
            top.push_back({{"token", p}, {"logprob", t.logprob}, {"bytes", token_bytes(p)}});
        }
        e["top_logprobs"] = top;
        return e;
    }
    Json top = Json::object();
    for (const TokenLogprob& t : ev.top) top[tok_.token_text(t.token)] = t.logprob;
    return Json{{"token", piece}, {"logprob", ev.logprob}, {"top", top}, {"text_offset", start}};
}

// A chat's {"content": [...]}, or the completions API's parallel lists.
Json Completion::logprobs_json(const Json& entries) const {
    if (params_.top_logprobs < 0) return nullptr;
    if (output_) return Json{{"content", entries}};
    Json tokens = Json::array(), lps = Json::array(), tops = Json::array(), offsets = Json::array();
    for (const Json& e : entries) {
        tokens.push_back(e["token"]);
        lps.push_back(e["logprob"]);
        tops.push_back(e["top"]);
        offsets.push_back(e["text_offset"]);
    }
    return Json{{"tokens", tokens},
                {"token_logprobs", lps},
                {"top_logprobs", tops},
                {"text_offset", offsets}};
}

Json Completion::chunk(Json delta_or_text, const Json& finish, Json logprobs) const {
    Json c;
    c["id"] = id_;
    c["object"] = output_ ? "chat.completion.chunk" : "text_completion";
    c["created"] = created_;
    c["model"] = model_;
    c["system_fingerprint"] = "deltallm";
    Json choice;
    choice["index"] = 0;
    choice[output_ ? "delta" : "text"] = std::move(delta_or_text);
    choice["logprobs"] = std::move(logprobs);
    choice["finish_reason"] = finish;
    c["choices"] = Json::array({choice});
    if (params_.include_usage) c["usage"] = nullptr;  // as OpenAI: null until the last chunk
    return c;
}

int64_t Completion::completion_tokens() const {
    return text_.stopped() ? taken_ : done_.generated_tokens;
}

Json Completion::usage() const {
    Json u;
    u["prompt_tokens"] = done_.prompt_tokens;
    u["completion_tokens"] = completion_tokens();
    u["total_tokens"] = done_.prompt_tokens + completion_tokens();
    u["prompt_tokens_details"] = {{"cached_tokens", done_.cached_tokens}};
    return u;
}

Json Completion::timings() const {
    const GenerationEvent& d = done_;
    const int64_t prompt_n = d.prompt_tokens - d.cached_tokens;
    // The prompt's time runs from the first step that carries the request to its first token,
    // the generation's from there to the end (a request cut before a token has none).
    const int64_t predicted_n = completion_tokens();
    const bool any = predicted_n > 0;
    const double prompt_ms = any ? 1e3 * std::max(0.0, d.first_token_seconds - d.queue_seconds) : 0;
    const double predicted_ms =
        any ? 1e3 * std::max(0.0, d.total_seconds - d.first_token_seconds) : 0;
    // (Rates per generated token, the first included, as llama-server counts them.)
    auto per_token = [](double ms, int64_t n) { return n > 0 ? ms / double(n) : 0.0; };
    auto per_second = [](double ms, int64_t n) { return ms > 0 ? 1e3 * double(n) / ms : 0.0; };
    Json t;
    t["cache_n"] = d.cached_tokens;
    t["prompt_n"] = prompt_n;
    t["prompt_ms"] = prompt_ms;
    t["prompt_per_token_ms"] = per_token(prompt_ms, prompt_n);
    t["prompt_per_second"] = per_second(prompt_ms, prompt_n);
    t["predicted_n"] = predicted_n;
    t["predicted_ms"] = predicted_ms;
    t["predicted_per_token_ms"] = per_token(predicted_ms, predicted_n);
    t["predicted_per_second"] = per_second(predicted_ms, predicted_n);
    t["queue_ms"] = 1e3 * d.queue_seconds;
    t["prepare_ms"] = 1e3 * prepare_seconds_;
    return t;
}

std::vector<Json> Completion::on_event(const GenerationEvent& ev) {
    std::vector<Json> out;
    std::string piece;
    Json delta = Json::object();
    const bool last = ev.kind == GenerationEvent::Kind::done;
    if (!last) {
        if (text_.stopped()) return out;  // made before the cancellation took effect
        ++taken_;
        const size_t start = text_.decoded();
        if (params_.top_logprobs >= 0) {
            Json e = logprob_entry(ev, start);
            logprobs_.push_back(e);
            pending_.push_back(std::move(e));
            pending_starts_.push_back(start);
        }
        piece = text_.push(ev.token);
        // The tokens of the stop string itself are no part of the answer (none of their text was
        // released, so none of their entries was sent).
        while (text_.stopped() && !pending_starts_.empty() &&
               pending_starts_.back() >= text_.released()) {
            pending_starts_.pop_back();
            pending_.erase(pending_.size() - 1);
            logprobs_.erase(logprobs_.size() - 1);
        }
        if (output_) delta = output_->push(piece);
    } else {
        done_ = ev;
        finished_ = true;
        piece = text_.finish();
        if (output_) {
            delta = output_->push(piece);
            Json rest = output_->finish(message_);
            for (auto& [k, v] : rest.items()) {
                if (k == "tool_calls")
                    for (auto& call : v) delta["tool_calls"].push_back(call);
                else
                    delta[k] = delta.value(k, std::string()) + v.get<std::string>();
            }
        }
        switch (ev.finish) {
            case FinishReason::eog:
            case FinishReason::cancelled:  // by a stop string, or the server stopping
                finish_reason_ = "stop";
                break;
            case FinishReason::length:
            case FinishReason::context:
                finish_reason_ = "length";
                break;
            case FinishReason::error:
                throw ApiError(500, "generation failed: " + ev.error);
        }
        if (output_ && output_->has_tool_calls()) finish_reason_ = "tool_calls";
    }
    const bool has_text = output_ ? !delta.empty() : !piece.empty();
    if (has_text || (last && !pending_.empty())) {
        // The entries of tokens whose text has begun to be released (at the end, all).
        Json ready = Json::array();
        size_t n = 0;
        while (n < pending_starts_.size() && (last || pending_starts_[n] < text_.released())) ++n;
        for (size_t i = 0; i < n; ++i) ready.push_back(std::move(pending_[i]));
        pending_.erase(pending_.begin(), pending_.begin() + (std::ptrdiff_t)n);
        pending_starts_.erase(pending_starts_.begin(), pending_starts_.begin() + (std::ptrdiff_t)n);
        out.push_back(chunk(output_ ? delta : Json(piece), nullptr, logprobs_json(ready)));
    }
    if (!output_) all_text_ += piece;
    if (last) {
        out.push_back(chunk(output_ ? Json::object() : Json(""), finish_reason_, nullptr));
        out.back()["timings"] = timings();
        if (params_.include_usage) {
            Json u = chunk(nullptr, nullptr, nullptr);
            u["choices"] = Json::array();
            u["usage"] = usage();
            out.push_back(u);
        }
    }
    return out;
}

Json Completion::response() const {
    Json r;
    r["id"] = id_;
    r["object"] = output_ ? "chat.completion" : "text_completion";
    r["created"] = created_;
    r["model"] = model_;
    r["system_fingerprint"] = "deltallm";
    Json choice;
    choice["index"] = 0;
    if (output_)
        choice["message"] = message_;
    else
        choice["text"] = all_text_;
    choice["logprobs"] = logprobs_json(logprobs_);
    choice["finish_reason"] = finish_reason_;
    r["choices"] = Json::array({choice});
    r["usage"] = usage();
    r["timings"] = timings();
    return r;
}

}  // namespace dl::server
