// The HTTP side of `deltallm serve` (see server.h): the HTTP library's setup, the routes,
// authentication, errors and the server's lifecycle. A completion request's own handling is in
// completion_route.cpp.
#include <malloc.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>
#include <thread>

#include "core/log.h"
#include "core/printable.h"
#include "engine/engine.h"
#include "server/request.h"
#include "server/server_impl.h"
#include "server/sockets.h"
#include "tokenizer/utf8.h"

namespace dl::server {

using namespace std::chrono_literals;

bool same_key(const std::string& presented, const std::string& expected) {
    // Walk the whole presented key whatever it holds; fold the length difference in as well.
    unsigned diff = presented.size() == expected.size() ? 0u : 1u;
    for (size_t i = 0; i < presented.size(); ++i) {
        const unsigned char e = expected.empty() ? 0 : (unsigned char)expected[i % expected.size()];
        diff |= (unsigned char)presented[i] ^ e;
    }
    return diff == 0 && !expected.empty();
}

namespace {

std::string body_too_large(size_t max_body) {
    return fmt::format("the request body is larger than the limit of {} bytes", max_body);
}

// Whether a request's framing headers say plainly how long its body is; an error to answer at
// once otherwise, before any of the body is read. (The HTTP library would wait for a body of a
// negative or absurd length until its read timeout, and for the end of a body in an unknown
// transfer coding.) A body with two lengths, or a length beside chunks, is refused rather than
// guessed, as HTTP/1.1 allows.
std::optional<ApiError> framing_error(const httplib::Request& req, size_t max_body) {
    // HTTP allows no control character but tab in a header (the library would keep one, and a
    // NUL would cut the value short wherever it is read as a C string: an API key among them).
    for (const auto& [name, value] : req.headers)
        for (const std::string* s : {&name, &value})
            for (unsigned char c : *s)
                if ((c < 0x20 && c != '\t') || c == 0x7f)
                    return ApiError(400, fmt::format("the header '{}' holds a control character",
                                                     printable(name)));
    const size_t codings = req.get_header_value_count("Transfer-Encoding");
    const size_t lengths = req.get_header_value_count("Content-Length");
    if (codings > 0) {
        std::string te = req.get_header_value("Transfer-Encoding");
        std::transform(te.begin(), te.end(), te.begin(),
                       [](unsigned char c) { return (char)std::tolower(c); });
        if (codings > 1 || te != "chunked")
            return ApiError(400, fmt::format("Transfer-Encoding '{}' is not supported: send the "
                                             "body as it is (Content-Length) or chunked",
                                             printable(req.get_header_value("Transfer-Encoding"))));
        if (lengths > 0)
            return ApiError(400,
                            "a request may not have both Content-Length and "
                            "Transfer-Encoding");
        return std::nullopt;
    }
    std::string length;
    for (size_t i = 0; i < lengths; ++i) {
        const std::string v = req.get_header_value("Content-Length", i);
        if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos)
            return ApiError(
                400, fmt::format("Content-Length '{}' is not a number of bytes", printable(v)));
        if (i > 0 && v != length)
            return ApiError(400, "the request has two different Content-Length headers");
        length = v;
    }
    // A request with neither has no body (RFC 9112, 6.3); the library would wait for one until
    // the connection closed.
    if (lengths == 0 && (req.method == "POST" || req.method == "PUT" || req.method == "PATCH"))
        return ApiError(411, "the request has no body: send its JSON with a Content-Length");
    // A body somewhat over the limit is read and dropped by the library before its 413, so that
    // a client that sends it whole before reading gets the answer; one far over it is not.
    if (!length.empty() && std::stoull(length) > 4 * (uint64_t)max_body)
        return ApiError(413, body_too_large(max_body));
    return std::nullopt;
}

}  // namespace

httplib::Server::Handler Server::Impl::guarded(httplib::Server::Handler f) {
    return [this, f](const httplib::Request& req, httplib::Response& res) {
        ConnectionGuard::request_read();  // the body too, by now
        try {
            // A body sent with a length past the limit never gets here (the library reads and
            // drops it, framing_error refuses one far past it); one sent in chunks arrives
            // whole, and is refused here.
            if (req.body.size() > opt.max_body_bytes)
                throw ApiError(413, body_too_large(opt.max_body_bytes));
            f(req, res);
        } catch (const ApiError& e) {
            reply_error(res, e.status(), e.what(), e.type());
            if (e.status() == 503) res.set_header("Retry-After", "1");
        } catch (const Error& e) {
            reply_error(res, 400, e.what());  // bad input found by a lower layer
        } catch (const std::bad_alloc&) {
            reply_error(res, 500, "the server ran out of memory for this request");
        } catch (const std::exception& e) {
            log::warn("{} {}: {}", req.method, req.path, e.what());
            reply_error(res, 500, std::string("internal error: ") + e.what());
        }
        // A large body's parsed value and rendered prompt leave many freed pages in the
        // allocator's arenas; they go back to the system rather than stay for good.
        if (req.body.size() > (1u << 20)) malloc_trim(0);
    };
}

void Server::Impl::routes() {
    auto chat_route = guarded([this](const auto& req, auto& res) { complete(req, res, true); });
    auto text_route = guarded([this](const auto& req, auto& res) { complete(req, res, false); });
    http.Post("/v1/chat/completions", chat_route);
    http.Post("/chat/completions", chat_route);
    http.Post("/v1/completions", text_route);
    http.Post("/completions", text_route);

    auto models = [this](const httplib::Request&, httplib::Response& res) {
        Json m;
        m["id"] = model_id;
        m["object"] = "model";
        m["created"] = created;
        m["owned_by"] = "deltallm";
        m["meta"] = {{"n_ctx", n_ctx}, {"n_vocab", tok->n_vocab()}};
        reply_json(res, Json{{"object", "list"}, {"data", Json::array({m})}});
    };
    http.Get("/v1/models", models);
    http.Get("/models", models);
    http.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
        if (req.matches[1] != model_id)
            return reply_error(res, 404,
                               "The model '" + std::string(req.matches[1]) + "' does not exist");
        reply_json(res, Json{{"id", model_id},
                             {"object", "model"},
                             {"created", created},
                             {"owned_by", "deltallm"}});
    });

    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        if (!ready) return reply_error(res, 503, "Loading model", "unavailable_error");
        reply_json(res, Json{{"status", "ok"}});
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        if (!opt.metrics)
            return reply_error(res, 404, "metrics are off: start the server with --metrics");
        res.set_content(
            metrics.render(scheduler->stats(), {guard->connections(), guard->cut_off()}),
            "text/plain; version=0.0.4");
    });
    http.Get("/props", [this](const httplib::Request&, httplib::Response& res) {
        Json p;
        p["model_alias"] = model_id;
        p["chat_template"] = chat->template_source();
        p["bos_token"] = tok->bos() >= 0 ? tok->token_text(tok->bos()) : "";
        p["eos_token"] = tok->eos() >= 0 ? tok->token_text(tok->eos()) : "";
        p["n_ctx"] = n_ctx;
        p["total_slots"] = opt.parallel;
        p["default_generation_settings"] = {{"n_ctx", n_ctx}};
        reply_json(res, p);
    });

    auto tokenize = [this](const httplib::Request& req, httplib::Response& res) {
        const Json body = parse_body(req.body);
        auto c = body.find("content");
        if (c == body.end() || !c->is_string()) bad_request("'content' must be a string");
        const bool add_special = get_bool(body, "add_special", false);
        const bool parse_special = get_bool(body, "parse_special", true);
        const bool with_pieces = get_bool(body, "with_pieces", false);
        std::vector<int32_t> ids = tok->encode(c->get<std::string>(), add_special, parse_special);
        Json tokens = Json::array();
        for (int32_t id : ids) {
            if (!with_pieces) {
                tokens.push_back(id);
                continue;
            }
            // A piece that is not whole UTF-8 (a byte of a character split across tokens) comes
            // as its bytes, as llama-server gives it: as text it could only be a replacement.
            const std::string piece = tok->token_text(id);
            const auto* bytes = reinterpret_cast<const uint8_t*>(piece.data());
            if (tokenizer::utf8::valid(piece))
                tokens.push_back({{"id", id}, {"piece", piece}});
            else
                tokens.push_back(
                    {{"id", id}, {"piece", std::vector<int>(bytes, bytes + piece.size())}});
        }
        reply_json(res, Json{{"tokens", tokens}});
    };
    http.Post("/tokenize", guarded(tokenize));

    http.Post("/detokenize", guarded([this](const httplib::Request& req, httplib::Response& res) {
                  const Json body = parse_body(req.body);
                  auto t = body.find("tokens");
                  if (t == body.end() || !t->is_array())
                      bad_request("'tokens' must be a list of token ids");
                  std::vector<int32_t> ids;
                  for (const Json& x : *t) {
                      if (!x.is_number_integer())
                          bad_request("'tokens' must be a list of token ids");
                      ids.push_back(token_id(x, tok->n_vocab(), ""));
                  }
                  reply_json(res, Json{{"content", tok->decode(ids)}});
              }));

    auto apply_template = guarded([this](const httplib::Request& req, httplib::Response& res) {
        const Json body = parse_body(req.body);
        reply_json(res, Json{{"prompt", chat->render(body)}});
    });
    http.Post("/apply-template", apply_template);
    http.Post("/apply_template", apply_template);
}

void Server::Impl::stop() {
    {
        std::lock_guard lock(stop_mutex);
        if (stopped) return;
        stopped = true;
    }
    stopping = true;
    if (scheduler) {
        std::unique_lock lock(jobs_mutex);
        const auto grace = std::chrono::duration<double>(opt.shutdown_grace_seconds);
        if (!jobs_cv.wait_for(lock, grace, [&] { return jobs == 0; })) {
            log::info("cancelling {} requests still running at shutdown", running.size());
            for (uint64_t id : running) scheduler->cancel(id);
            jobs_cv.wait_for(lock, 5s, [&] { return jobs == 0; });
        }
    }
    // The library's workers end with their connections: those waiting for a request are closed.
    guard->close_idle();
    // httplib's stop() does nothing before its listen loop runs: repeat it until listen() ends.
    while (listen_started && !listen_done) {
        http.stop();
        std::this_thread::sleep_for(10ms);
    }
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
    Impl& s = *impl_;
    if (s.opt.parallel < 1 || s.opt.parallel > ServerOptions::kMaxParallel)
        fail("--parallel must be 1 to {}, not {}", ServerOptions::kMaxParallel, s.opt.parallel);
    // One thread per connection being answered: every slot and every queued request can hold
    // one (a streamed answer keeps its connection), with some left for the other routes.
    if (!(s.opt.timeout_seconds >= 1 && s.opt.timeout_seconds <= 3600))
        fail("--timeout must be 1 to 3600 seconds, not {}", s.opt.timeout_seconds);
    ConnectionGuard::Options guard;
    guard.workers = (size_t)(s.opt.parallel + s.opt.queue_limit + 16);
    guard.request_seconds = s.opt.timeout_seconds;
    s.guard = std::make_unique<ConnectionGuard>(guard);
    s.http.new_task_queue = [&s] { return s.guard->make_task_queue(); };
    s.http.set_payload_max_length(s.opt.max_body_bytes);
    const auto timeout = std::chrono::duration<double>(s.opt.timeout_seconds);
    s.http.set_read_timeout(timeout);
    s.http.set_write_timeout(timeout);
    s.http.set_tcp_nodelay(true);
    // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second server on the
    // same port would start and silently share the traffic instead of failing to bind.
    s.http.set_socket_options([](socket_t sock) {
        int yes = 1;
        ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });

    s.http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        Impl& s = *impl_;
        // (The library calls this before it reads a body: a request with one is read whole when
        // its handler runs, guarded(); a slow body stays under the guard's deadline till then.)
        const bool has_body =
            req.has_header("Content-Length") || req.has_header("Transfer-Encoding");
        if (!has_body) ConnectionGuard::request_read();
        if (std::optional<ApiError> e = framing_error(req, s.opt.max_body_bytes)) {
            res.set_header("Connection", "close");
            reply_error(res, e->status(), e->what());
            return httplib::Server::HandlerResponse::Handled;
        }
        // The HTTP library would cut any answer to a Range header's bytes (an API answer cut
        // mid-JSON, with status 200, or an empty 416); HTTP lets a server ignore the header and
        // send the whole answer, as this one does. (The request is the library's own object,
        // not a constant one: it parsed the ranges into it.)
        const_cast<httplib::Request&>(req).ranges.clear();
        if (req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;

        if (!s.opt.api_keys.empty()) {
            const auto at = req.headers.find("Authorization");
            const std::string auth = at == req.headers.end() ? std::string() : at->second;
            const std::string bearer = "Bearer ";
            bool ok = false;
            if (auth.compare(0, bearer.size(), bearer) == 0) {
                const std::string key = auth.substr(bearer.size());
                for (const std::string& k : s.opt.api_keys) ok |= same_key(key, k);
            }
            if (!ok) {
                reply_error(res, 401,
                            auth.empty() ? "no API key given: send 'Authorization: Bearer KEY'"
                                         : "the API key is not valid");
                return httplib::Server::HandlerResponse::Handled;
            }
        }
        if (!s.ready) {
            reply_error(res, 503, "Loading model", "unavailable_error");
            res.set_header("Retry-After", "1");
            return httplib::Server::HandlerResponse::Handled;
        }
        if (s.stopping) {
            reply_error(res, 503, "the server is shutting down");
            return httplib::Server::HandlerResponse::Handled;
        }
        return httplib::Server::HandlerResponse::Unhandled;
    });
    s.http.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
            if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
            const int status = res.status;
            std::string message;
            if (status == 404)
                message = fmt::format("there is no route {} {}", req.method, req.path);
            else if (status == 413)
                message = body_too_large(impl_->opt.max_body_bytes);
            else if (status == 400)
                message = "the request could not be read";
            else
                message = fmt::format("the request failed with status {}", status);
            reply_error(res, status, message);
            res.status = status;
            return httplib::Server::HandlerResponse::Handled;
        }));
    s.http.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
            std::string what = "unknown error";
            try {
                if (ep) std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                what = e.what();
            } catch (...) {
            }
            reply_error(res, 500, "internal error: " + what);
        });
    s.http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
        ConnectionGuard::answer_written();
        impl_->metrics.count_request(res.status);
        log::debug("{} {} -> {}", req.method, req.path, res.status);
    });
    s.routes();
}

Server::~Server() {
    if (impl_->scheduler) impl_->scheduler->shutdown(false);
}

int Server::bind() {
    Impl& s = *impl_;
    if (s.opt.port < 0 || s.opt.port > 65535) fail("--port must be 0 to 65535, not {}", s.opt.port);
    int port = s.opt.port;
    if (port == 0) {
        port = s.http.bind_to_any_port(s.opt.host);
        if (port < 0) port = 0;
    } else if (!s.http.bind_to_port(s.opt.host, port)) {
        port = 0;
    }
    if (port <= 0)
        fail("cannot listen on {}:{} (the address is in use, or not one of this machine's)",
             s.opt.host, s.opt.port);
    s.guard->watch_port(port);
    if (!widen_backlog(port, SOMAXCONN))
        log::warn("the listening socket keeps its backlog of 5: bursts of clients may be refused");
    return port;
}

void Server::listen() {
    impl_->listen_started = true;
    if (!impl_->stopping) impl_->http.listen_after_bind();
    impl_->listen_done = true;
}

void Server::load(Engine& engine, const std::string& model_id) {
    Impl& s = *impl_;
    s.engine = &engine;
    s.tok = &engine.tokenizer();
    s.model_id = model_id;
    s.created = (int64_t)std::time(nullptr);
    s.n_ctx = s.opt.n_ctx > 0 ? s.opt.n_ctx : engine.n_ctx();
    s.chat = std::make_unique<ChatBridge>(*s.tok, engine.model().hp.arch_name, s.opt.chat_template);
    SchedulerOptions so;
    so.parallel = s.opt.parallel;
    so.n_ctx = s.n_ctx;
    so.token_budget = s.opt.token_budget;
    so.queue_limit = s.opt.queue_limit;
    so.prefix_cache_bytes = s.opt.cache_bytes;
    if (so.prefix_cache_bytes == ServerOptions::kCacheAuto) {
        const uint64_t room = engine.executor().snapshot_room();
        so.prefix_cache_bytes = room > 0 ? room : ServerOptions::kCacheDefault;
    }
    so.prefix_cache_host_bytes = s.opt.cache_host_bytes;
    so.snapshot_every = s.opt.cache_every;
    if (so.prefix_cache_bytes > 0)
        log::info("prefix cache: {:.1f} GiB in the executor's memory, {:.1f} GiB in host memory",
                  (double)so.prefix_cache_bytes / (1 << 30),
                  (double)so.prefix_cache_host_bytes / (1 << 30));
    const tokenizer::Tokenizer* tok = s.tok;
    so.is_eog = [tok](int32_t t) { return tok->is_eog(t); };
    s.scheduler = std::make_unique<Scheduler>(engine.executor(), so);
    // While /health still answers 503: what the first steps would otherwise make on the way.
    // (Only time is at stake: a warm-up that fails leaves the steps to make it themselves.)
    try {
        if (const std::string w = engine.executor().warm_up(so.parallel); !w.empty())
            log::info("{}", w);
    } catch (const std::exception& e) {
        log::warn("the warm-up stopped: {}", e.what());
    }
    s.ready = true;
}

void Server::stop() {
    impl_->stop();
}

bool Server::stopping() const {
    return impl_->stopping;
}

}  // namespace dl::server
