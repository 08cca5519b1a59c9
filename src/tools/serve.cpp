// `deltallm serve`: the OpenAI-compatible HTTP server (src/server/) over a loaded model. The
// address is bound before the model loads, so /health answers 503 while it does; SIGTERM and
// SIGINT stop it gracefully (running requests may finish for a while) with exit code 0.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "core/printable.h"
#include "engine/scheduler.h"
#include "server/server.h"
#include "template/template.h"
#include "tools/common.h"
#include "tools/tool.h"

namespace dl::tools {

namespace {

struct ServeArgs {
    ModelArgs model;
    server::ServerOptions server;
    std::string api_key, api_key_file, chat_template_file, alias;
    bool api_key_given = false;  // --api-key, even empty
    std::string cache_mib = "auto";
    double cache_host_mib = 4096;
};

// Keys, one a line; blank lines and surrounding whitespace ignored.
std::vector<std::string> read_keys(const std::string& path) {
    std::string text = read_text_file(path);
    std::vector<std::string> keys;
    size_t pos = 0;
    while (pos <= text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        std::string line = text.substr(pos, eol - pos);
        while (!line.empty() && std::isspace((unsigned char)line.back())) line.pop_back();
        size_t a = 0;
        while (a < line.size() && std::isspace((unsigned char)line[a])) ++a;
        if (a < line.size()) keys.push_back(line.substr(a));
        pos = eol + 1;
    }
    if (keys.empty()) fail("--api-key-file {} holds no key", path);
    return keys;
}

int serve(ServeArgs& a) {
    if (a.api_key_given && !a.api_key_file.empty())
        fail("give the key one way only: --api-key or --api-key-file");
    // An empty key (an unset variable in a script) would serve without one.
    if (a.api_key_given && a.api_key.find_first_not_of(" \t\r\n") == std::string::npos)
        fail("--api-key is empty: give a key, or leave the flag out to serve without one");
    if (a.api_key_given) a.server.api_keys.push_back(a.api_key);
    if (!a.api_key_file.empty()) a.server.api_keys = read_keys(a.api_key_file);
    if (!a.chat_template_file.empty()) {
        a.server.chat_template = read_text_file(a.chat_template_file);
        tmpl::ChatTemplate parsed(a.server.chat_template);  // a syntax error before the model loads
    }
    if (a.cache_mib != "auto") {
        double mib = -1;
        size_t used = 0;
        try {
            mib = std::stod(a.cache_mib, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != a.cache_mib.size() || !(mib >= 0 && mib <= 1e7))
            fail("--cache-mib must be auto or 0 to 10^7, not {}", printable(a.cache_mib));
        a.server.cache_bytes = (uint64_t)(mib * 1048576.0);
    }
    if (!(a.cache_host_mib >= 0 && a.cache_host_mib <= 1e7))
        fail("--cache-host-mib must be 0 to 10^7, not {}", a.cache_host_mib);
    a.server.cache_host_bytes = (uint64_t)(a.cache_host_mib * 1048576.0);
    if (a.server.cache_every < 0 || a.server.cache_every > (int64_t{1} << 30))
        fail("--cache-every must be 0 (off) to 2^30 tokens, not {}", a.server.cache_every);
    // Prompt chunks end on multiples of chunk_align tokens; a snapshot point must be one of them.
    const int64_t align = dl::SchedulerOptions{}.chunk_align;
    a.server.cache_every = (a.server.cache_every + align - 1) / align * align;
    if (a.server.queue_limit < 0 || a.server.queue_limit > 4096)
        fail("--queue must be 0 to 4096, not {}", a.server.queue_limit);
    a.model.check();     // a wrong path or flag before the server says it listens
    a.server.n_ctx = 0;  // the engine's: -c sets it
    a.model.sequences = a.server.parallel;
    a.model.prefix_cache = a.server.cache_bytes != 0;

    // Signals are taken by one thread with sigwait; every other thread (the HTTP workers, the
    // scheduler, the CPU chain's pool) inherits the blocked mask. A client that goes away must
    // not kill the server with SIGPIPE.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    // Each connection holds two descriptors (the HTTP library's and its guard's): the server
    // takes as many as the system lets it, not the shell's usual 1,024.
    if (rlimit r{}; ::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &r);
    }

    // The engine outlives the server, whose scheduler steps it until the server is destroyed:
    // declared the other way round, the engine's weights were freed under a running step at
    // shutdown.
    std::unique_ptr<Engine> engine;
    server::Server srv(a.server);
    const int port = srv.bind();
    std::fprintf(stderr, "deltallm: listening on http://%s:%d\n", a.server.host.c_str(), port);
    const std::string& h = a.server.host;
    if (a.server.api_keys.empty() && h != "localhost" && h != "::1" && h.rfind("127.", 0) != 0)
        std::fprintf(stderr,
                     "deltallm: warning: %s is reachable from other machines and no API key is "
                     "set (--api-key-file)\n",
                     printable(h).c_str());
    std::fflush(stderr);
    std::thread http([&] { srv.listen(); });
    std::atomic<bool> handled{false}, ending{false};
    std::thread signals([&] {
        int sig = 0;
        sigwait(&stop_signals, &sig);
        if (ending) return;  // woken by end_signals below
        handled = true;
        std::fprintf(stderr, "deltallm: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
        srv.stop();
    });
    auto end_signals = [&] {
        if (!handled) {
            ending = true;
            pthread_kill(signals.native_handle(), SIGTERM);
        }
        signals.join();
    };

    try {
        engine = a.model.open();
        if (!engine->has_tokenizer()) fail("the model has no tokenizer, which serving needs");
        std::string id = a.alias;
        if (id.empty())
            id = a.model.path.empty() ? "deltallm-tiny"
                                      : std::filesystem::path(a.model.path).filename().string();
        std::fprintf(stderr, "deltallm: serving %s on %s, %lld slots of %lld tokens\n",
                     printable(id).c_str(), engine->executor().name().c_str(),
                     (long long)a.server.parallel, (long long)engine->n_ctx());
        std::fflush(stderr);
        srv.load(*engine, id);
    } catch (...) {
        srv.stop();
        http.join();
        end_signals();
        throw;
    }
    http.join();
    end_signals();
    std::fprintf(stderr, "deltallm: stopped\n");
    return 0;
}

Registrar reg("serve", "an OpenAI-compatible HTTP server", [](CLI::App& app) -> Run {
    auto a = std::make_shared<ServeArgs>();
    a->model.add_to(app);
    app.add_option("--host", a->server.host, "address to listen on")->capture_default_str();
    app.add_option("--port", a->server.port, "port to listen on (0: any free one)")
        ->capture_default_str();
    // (The range is checked on the text as given: a value past the integer's range would
    // otherwise reach the message saturated.)
    app.add_option("--parallel,--np", a->server.parallel, "requests generating at once (slots)")
        ->check(CLI::Range(int64_t{1}, server::ServerOptions::kMaxParallel))
        ->capture_default_str();
    app.add_option("--queue", a->server.queue_limit,
                   "requests that may wait for a slot; beyond them the answer is 503")
        ->capture_default_str();
    app.add_option("--cache-mib", a->cache_mib,
                   "prefix cache size in MiB (0: none; auto: what a discrete GPU has left after "
                   "the model, its KV cache and slots, else 1024)")
        ->capture_default_str();
    app.add_option("--cache-host-mib", a->cache_host_mib,
                   "host memory for prefix-cache snapshots moved off the device (MiB)")
        ->capture_default_str();
    app.add_option(
           "--cache-every", a->server.cache_every,
           "keep a prefix-cache snapshot where a prompt chunk passes a multiple of N tokens, "
           "and where a prompt parts from a cached one N+ tokens past its hit (0: off)")
        ->capture_default_str();
    app.add_flag("!--no-warm-next-turn", a->server.warm_next_turn,
                 "do not prefill a chat's next turn's beginning once an answer is complete (done "
                 "where the template renders the answer otherwise in later turns, as Qwen3.5's); "
                 "every such prompt then keeps a snapshot where the next turn parts from it");
    app.add_option("--timeout", a->server.timeout_seconds,
                   "seconds a client has to send a whole request, and each read or write's limit")
        ->capture_default_str();
    auto* key = app.add_option("--api-key", a->api_key, "require 'Authorization: Bearer KEY'");
    app.add_option("--api-key-file", a->api_key_file,
                   "read the accepted keys from a file, one a line");
    app.add_option("--chat-template-file", a->chat_template_file,
                   "a Jinja chat template to use instead of the model's");
    app.add_option("--alias", a->alias, "the model's name in the API (default: the file's name)");
    app.add_flag("--metrics", a->server.metrics, "serve Prometheus metrics at GET /metrics");
    return [a, key] {
        a->api_key_given = key->count() > 0;
        return serve(*a);
    };
});

}  // namespace

}  // namespace dl::tools
