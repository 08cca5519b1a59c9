// A completion request (POST /v1/chat/completions, /v1/completions): its prompt and parameters
// checked, handed to the scheduler, and answered as one JSON body or as server-sent events.
#include <chrono>
#include <optional>
#include <random>

#include "engine/engine.h"
#include "server/completion.h"
#include "server/generation.h"
#include "server/request.h"
#include "server/server_impl.h"
#include "server/sockets.h"
#include "server/sse.h"

namespace dl::server {

using namespace std::chrono_literals;

namespace {

uint64_t random_seed() {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    return rng();
}

}  // namespace

// One completion request in flight: the answer being built, the queue its events arrive
// through, and its scheduler id (to cancel it when the client goes or a stop string ends it).
struct Server::Impl::Job {
    Impl& server;
    Completion completion;
    std::shared_ptr<EventQueue> queue = std::make_shared<EventQueue>();
    uint64_t request_id = 0;
    bool cancelled = false, started = false;
    int idle_polls = 0;  // event-queue waits in a row that found nothing
    // A chat whose next turn is to be warmed once this answer is complete (its body).
    std::optional<Json> warm_body;

    Job(Impl& s, CompletionParams p, std::unique_ptr<ChatOutput> output)
        : server(s), completion(*s.tok, s.model_id, std::move(p), std::move(output)) {
        std::lock_guard lock(server.jobs_mutex);
        ++server.jobs;
    }
    ~Job() {
        if (!completion.finished()) cancel();
        std::lock_guard lock(server.jobs_mutex);
        --server.jobs;
        std::erase(server.running, request_id);
        server.jobs_cv.notify_all();
    }

    void cancel() {
        if (cancelled) return;
        cancelled = true;
        queue->stop();
        if (request_id) server.scheduler->cancel(request_id);
    }

    std::vector<Json> on_event(const GenerationEvent& ev) {
        std::vector<Json> chunks = completion.on_event(ev);
        if (completion.stopped() && !completion.finished()) cancel();  // the rest is cut anyway
        if (completion.finished()) {
            server.metrics.record(completion.done());
            // An answer the client sends back as the next turn's history: one that ended (the
            // model's end, a stop string or max_tokens), not a call of a tool (whose result,
            // not a user, comes next), nor one cut by a full context or a disconnect.
            const FinishReason why = completion.done().finish;
            const bool answered =
                why == FinishReason::eog || why == FinishReason::length || completion.stopped();
            if (warm_body && answered && completion.finish_reason() != "tool_calls")
                server.warm_next_turn(*warm_body, completion.message());
        }
        return chunks;
    }
};

void Server::Impl::warm_next_turn(const Json& body, const Json& reply) {
    // Only with requests waiting for none: a warm-up is work a client may never need, and it
    // should not take a slot or a place in the queue from one that is waiting.
    if (stopping || scheduler->waiting() > 0) return;
    GenerationRequest g;
    g.prompt = chat->next_turn_prefix(body, reply);
    if (g.prompt.empty() || (int64_t)g.prompt.size() >= n_ctx) return;
    g.max_tokens = 1;  // (a request takes at least one step that samples; its token is dropped)
    g.warm_up = true;
    g.warm_up_delay = kNextTurnWarmUpDelay;
    const int64_t tokens = (int64_t)g.prompt.size();
    auto counted = [this, tokens](const GenerationEvent& ev) {
        if (ev.kind == GenerationEvent::Kind::done)
            metrics.count_warmup(tokens, ev.finish == FinishReason::cancelled);
        return true;
    };
    try {
        scheduler->submit(std::move(g), counted);
    } catch (const Error&) {
        // A prompt the scheduler refuses: no warm-up.
    }
}

void Server::Impl::check_model(const std::string& name) const {
    if (!name.empty() && name != model_id)
        throw ApiError(404, fmt::format("The model '{}' does not exist; this server has '{}'", name,
                                        model_id));
}

std::vector<int32_t> Server::Impl::completion_prompt(const Json& body) const {
    auto it = body.find("prompt");
    if (it == body.end() || it->is_null()) bad_request("'prompt' is required");
    if (get_bool(body, "echo", false)) bad_request("'echo' is not supported yet");
    if (!get_string(body, "suffix", "").empty()) bad_request("'suffix' is not supported yet");
    if (auto b = body.find("best_of"); b != body.end() && !b->is_null() && *b != 1)
        bad_request("'best_of' must be 1: one choice per request is supported");
    const Json* p = &*it;
    // A list of one prompt is the prompt (the API takes lists for batches).
    if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array()))
        p = &(*p)[0];
    std::vector<int32_t> ids;
    if (p->is_string()) {
        ids = tok->encode(p->get<std::string>(), /*add_special=*/true, /*parse_special=*/true);
    } else if (p->is_array()) {
        const int64_t V = tok->n_vocab();
        for (const Json& t : *p) {
            if (!t.is_number_integer())
                bad_request(
                    "'prompt' must be a string, a list of token ids, or a list of one of "
                    "them (several prompts in one request are not supported)");
            ids.push_back(token_id(t, V, "in 'prompt'"));
        }
    } else {
        bad_request("'prompt' must be a string or a list of token ids");
    }
    if (ids.empty()) bad_request("the prompt is empty");
    return ids;
}

void Server::Impl::complete(const httplib::Request& req, httplib::Response& res, bool chat_route) {
    const auto received = std::chrono::steady_clock::now();
    const Json body = parse_body(req.body);
    CompletionParams p =
        parse_completion_params(body, chat_route, n_ctx, tok->n_vocab(), random_seed());
    check_model(p.model);

    GenerationRequest g;
    std::unique_ptr<ChatOutput> output;
    bool warm = false;  // the next turn renders this reply otherwise than it is generated
    if (chat_route) {
        ChatPrompt cp = chat->prompt(body);
        g.prompt = std::move(cp.tokens);
        warm = cp.before_reply > 0;
        if (cp.before_last_user > 0) g.snapshot_at.push_back(cp.before_last_user);
        const bool short_turn =
            cp.before_last_user > 0 && cp.before_reply - cp.before_last_user <= kShortTurnTokens;
        if (cp.before_reply > 0 && !(opt.warm_next_turn && short_turn))
            g.snapshot_at.push_back(cp.before_reply);
        output = chat->output(cp, body);
    } else {
        g.prompt = completion_prompt(body);
    }
    const int64_t n_prompt = (int64_t)g.prompt.size();
    if (n_prompt >= n_ctx)
        bad_request(
            "the prompt has {} tokens, and the context holds {} (leaving room for at "
            "least one generated token)",
            n_prompt, n_ctx);
    if (p.max_tokens > 0 && n_prompt + p.max_tokens > n_ctx)
        bad_request(
            "the prompt's {} tokens and max_tokens of {} make {}, more than the context "
            "of {} tokens",
            n_prompt, p.max_tokens, n_prompt + p.max_tokens, n_ctx);
    g.sampling = p.sampling;
    g.max_tokens = p.max_tokens;
    g.ignore_eos = p.ignore_eos;
    g.top_logprobs = p.top_logprobs;
    const ChatOutputFormat f = output ? output->format() : ChatOutputFormat{};
    g.constraint = output_constraint(
        p, f,
        chat_route ? chat->tool_call_openings(body, f.tool_calls) : std::vector<std::string>{},
        [this] {
            std::call_once(token_table_once,
                           [this] { token_table = std::make_shared<const TokenTable>(*tok); });
            return token_table;
        });

    auto job = std::make_shared<Job>(*this, p, std::move(output));
    job->completion.set_prepare_seconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - received).count());
    if (chat_route && opt.warm_next_turn && warm) job->warm_body = body;
    job->request_id = scheduler->submit(std::move(g), job->queue->sink(job->queue));
    if (job->request_id == 0) {
        job->cancelled = true;
        throw ApiError(503, stopping ? "the server is shutting down"
                                     : "the server is busy: too many requests are waiting; "
                                       "try again shortly");
    }
    {
        std::lock_guard lock(jobs_mutex);
        running.push_back(job->request_id);
    }

    if (!p.stream) {
        // Nothing is written before the answer, so the connection itself is asked now and then
        // whether the client is still there; if not, the request stops taking steps.
        const int client = ConnectionGuard::current_socket();
        auto last_check = std::chrono::steady_clock::now();
        while (!job->completion.finished()) {
            if (std::optional<GenerationEvent> ev = job->queue->pop(50ms)) job->on_event(*ev);
            const auto now = std::chrono::steady_clock::now();
            if (now - last_check < 50ms) continue;
            last_check = now;
            if (client_closed(client)) {
                job->cancel();
                return;  // no one to answer
            }
        }
        reply_json(res, job->completion.response());
        return;
    }

    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream",
        [job](size_t, httplib::DataSink& sink) {
            auto write = [&](const std::string& s) {
                if (sink.write(s.data(), s.size())) return true;
                job->cancel();  // the client went away
                return false;
            };
            if (!job->started) {
                job->started = true;
                if (auto opening = job->completion.opening_chunk())
                    if (!write(sse_event(*opening))) return false;
            }
            std::optional<GenerationEvent> ev = job->queue->pop(100ms);
            if (!ev) {
                // While the request waits (queued, or a long prompt), a comment line now and
                // then finds out whether the client is still there; clients skip comments.
                if (++job->idle_polls % 20 == 0 && !write(": waiting\n\n")) return false;
                if (sink.is_writable()) return true;
                job->cancel();
                return false;
            }
            job->idle_polls = 0;
            std::vector<Json> chunks;
            try {
                chunks = job->on_event(*ev);
            } catch (const ApiError& e) {
                write(sse_event(error_body(e.status(), e.what())));
                write(sse_done());
                sink.done();
                return true;
            }
            for (const Json& c : chunks)
                if (!write(sse_event(c))) return false;
            if (ev->kind == GenerationEvent::Kind::done) {
                if (!write(sse_done())) return false;
                sink.done();
            }
            return true;
        },
        [job](bool) {
            if (!job->completion.finished()) job->cancel();
        });
}

}  // namespace dl::server
