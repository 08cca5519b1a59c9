// The server's inside (see server.h), shared by its two halves: server.cpp (the HTTP library's
// setup, the routes, errors and the lifecycle) and completion_route.cpp (a completion request
// handed to the scheduler and answered as JSON or server-sent events).
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/chat_bridge.h"
#include "server/connection_guard.h"
#include "server/metrics.h"
#include "server/output_constraint.h"
#include "server/server.h"

namespace dl::server {

using Json = nlohmann::ordered_json;

inline void reply_json(httplib::Response& res, const Json& j, int status = 200) {
    res.status = status;
    res.set_content(dump(j), "application/json; charset=utf-8");
}

inline void reply_error(httplib::Response& res, int status, const std::string& message,
                        const std::string& type = {}) {
    res.status = status;
    res.set_content(dump(error_body(status, message, type)), "application/json; charset=utf-8");
}

struct Server::Impl {
    ServerOptions opt;
    std::unique_ptr<ConnectionGuard> guard;  // made before the HTTP library's workers, kept after
    httplib::Server http;
    std::atomic<bool> ready{false}, stopping{false};
    std::atomic<bool> listen_started{false}, listen_done{false};
    std::mutex stop_mutex;
    bool stopped = false;

    Engine* engine = nullptr;
    const tokenizer::Tokenizer* tok = nullptr;
    std::unique_ptr<ChatBridge> chat;
    std::unique_ptr<Scheduler> scheduler;
    // The vocabulary's bytes and classes for requests whose output is constrained (a JSON object,
    // a forced tool call), made at the first one.
    std::once_flag token_table_once;
    std::shared_ptr<const TokenTable> token_table;
    std::string model_id;
    int64_t n_ctx = 0;
    int64_t created = 0;
    Metrics metrics;

    // Responses still being produced, and the scheduler ids they wait on.
    std::mutex jobs_mutex;
    std::condition_variable jobs_cv;
    int64_t jobs = 0;
    std::vector<uint64_t> running;

    explicit Impl(ServerOptions o) : opt(std::move(o)) {}

    void routes();
    httplib::Server::Handler guarded(httplib::Server::Handler f);
    void check_model(const std::string& name) const;
    struct Job;
    void complete(const httplib::Request& req, httplib::Response& res, bool chat_route);
    std::vector<int32_t> completion_prompt(const Json& body) const;
    // ServerOptions::warm_next_turn for a chat request whose answer `reply` (the response's
    // message) is complete: its next turn's beginning prefilled as a request of its own.
    void warm_next_turn(const Json& body, const Json& reply);
    // Seconds a warm-up waits before it runs (GenerationRequest::warm_up_delay). A client that
    // sends the next turn at once (an agent, a benchmark) does so within a few milliseconds of
    // the answer's end, and the turn then reads the tokens in its own window rather than behind
    // the warm-up's (on an H100, 54.5 ms against 66.7 median for the 9B's later turns of a chat
    // over a document, r38 and r43); a person takes seconds.
    static constexpr double kNextTurnWarmUpDelay = 0.2;
    // Where the next turn is warmed, a prompt whose own turn (its last user message to the
    // generation prompt) is at most this many tokens keeps no snapshot before its generation
    // prompt (ChatPrompt::before_reply): that snapshot would cut the prompt's last window in two,
    // a window of a few tokens and the snapshot's copy on the way to the first token, and the
    // warm-up, starting from the turn's own hit instead, reads these tokens again while the user
    // reads the answer. A longer turn (a first one over a document) keeps it.
    static constexpr int64_t kShortTurnTokens = 256;
    void stop();
};

}  // namespace dl::server
