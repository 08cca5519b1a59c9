// `deltallm serve`: an OpenAI-compatible HTTP server (cpp-httplib) over one Scheduler. Routes:
// POST /v1/chat/completions and /v1/completions (streamed as server-sent events or not),
// GET /v1/models, /health, /metrics, /props, POST /tokenize, /detokenize, /apply-template.
// Every client error is an OpenAI error body with a 4xx status; nothing a request sends reaches
// the filesystem.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dl {
class Engine;
}

namespace dl::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;       // 0: any free port (bind() says which)
    int64_t parallel = 4;  // sequences generating at once, 1 to kMaxParallel
    static constexpr int64_t kMaxParallel = 256;
    int64_t n_ctx = 0;           // context of each slot; 0: the engine's
    int64_t queue_limit = 64;    // requests waiting beyond which the answer is 503
    int64_t token_budget = 512;  // tokens per scheduler step
    // The prefix cache's bytes in the executor's memory; 0: none; kCacheAuto: what the executor
    // planned for it (Executor::snapshot_room), else kCacheDefault.
    static constexpr uint64_t kCacheAuto = ~uint64_t{0}, kCacheDefault = 1ull << 30;
    uint64_t cache_bytes = kCacheAuto;
    // Snapshots past cache_bytes that the executor can move to host memory (the Vulkan driver's).
    uint64_t cache_host_bytes = 4ull << 30;
    // Prompts also keep a snapshot every this many tokens, so a shared beginning (a long system
    // prompt, a document) is reused by prompts that go on differently; 0: none.
    int64_t cache_every = 1024;
    // When a chat's template renders this turn's reply in later turns otherwise than the reply
    // was generated (ChatPrompt::before_reply: Qwen3 and Qwen3.5 drop its reasoning), prefill the
    // next turn's beginning (ChatTemplater::next_turn_prefix) as soon as the answer is complete,
    // so the next turn finds all but its new message in the prefix cache. Only while no request
    // is waiting in the queue. Without it, every such prompt keeps a snapshot where the next turn
    // parts from it (a window of its own for the generation prompt's few tokens); with it, only
    // long turns do (Impl::kShortTurnTokens).
    bool warm_next_turn = true;
    std::vector<std::string> api_keys;  // empty: no key needed
    std::string chat_template;          // template source; empty: the model's
    bool metrics = false;               // serve GET /metrics
    size_t max_body_bytes = 8u << 20;
    // A client's time to send a whole request once connected or answered (a slow one is cut off
    // then), and the limit of each read and write.
    double timeout_seconds = 30;
    double shutdown_grace_seconds = 10;  // running requests may finish for this long on stop()
};

class Server {
  public:
    explicit Server(ServerOptions options);
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Binds the address and returns the port; dl::Error with a sentence when it cannot.
    int bind();
    // Answers requests on the calling thread until stop(). Before load(), /health says 503 and
    // every other route answers 503 too.
    void listen();
    // Serves this model from now on, under the name model_id. The engine must outlive the
    // server; its executor belongs to the server's scheduler from here on.
    void load(Engine& engine, const std::string& model_id);
    // Stops taking requests (503), lets the running ones finish for the grace period, cancels
    // what is left, then ends listen(). Callable from any thread, more than once.
    void stop();
    bool stopping() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Constant-time comparison of a presented key with the expected one (no early exit on the first
// differing byte, so the time does not tell how much of a guess was right).
bool same_key(const std::string& presented, const std::string& expected);

}  // namespace dl::server
