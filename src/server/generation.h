// One generation request as an HTTP handler sees it: the scheduler's events handed from its
// thread to the handler's through a small queue, and the tokens turned into text that is safe to
// send (whole UTF-8 characters, never the end-of-generation token, never part of a stop string).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "server/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace dl::server {

// Filled on the scheduler's thread by sink(), drained by the handler. stop() makes the sink
// return false, which ends the request at its next token.
class EventQueue {
  public:
    GenerationSink sink(std::shared_ptr<EventQueue> self);
    // Waits at most `wait` for the next event.
    std::optional<GenerationEvent> pop(std::chrono::milliseconds wait);
    void stop();

  private:
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<GenerationEvent> events_;
    bool stop_ = false;
};

// Tokens -> text: the streaming UTF-8 decoder, then the stop strings.
class TextStream {
  public:
    TextStream(const tokenizer::Tokenizer& tok, std::vector<std::string> stops, bool hide_eog);
    // The text that may be sent after this token.
    std::string push(int32_t token);
    // What is left at the end of generation.
    std::string finish();
    bool stopped() const { return stop_.stopped(); }
    // Bytes of text the tokens pushed so far decoded to, and bytes push() and finish() returned:
    // a token that began at or past released() once stopped() is true lies wholly in the stop
    // string (or after it).
    size_t decoded() const { return decoded_; }
    size_t released() const { return released_; }

  private:
    const tokenizer::Tokenizer& tok_;
    tokenizer::StreamDecoder decoder_;
    StopMatcher stop_;
    bool hide_eog_;
    size_t decoded_ = 0, released_ = 0;
};

}  // namespace dl::server
