// `deltallm batch -m M -i prompts.jsonl -o out.jsonl [--parallel N]`: offline generation for many
// prompts at once through the scheduler (engine/scheduler.h), the way evaluations run. Each input
// line is a JSON object with "prompt" (text) or "messages" (a chat, rendered by the model's own
// chat template, with optional "tools" and "chat_template_kwargs") and optionally "id",
// "max_tokens", "seed", "temperature", "top_k", "top_p", "min_p", "response_format"
// (json_object or json_schema: the text is a JSON object, as the server makes it); each output
// line, in input order,
// holds the text, the token counts and the timings. Every line is checked before any work starts,
// and the output file appears only complete (core/output_file.h).
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/output_file.h"
#include "engine/chat_output.h"
#include "engine/chat_template.h"
#include "engine/json_constraint.h"
#include "engine/json_schema.h"
#include "engine/scheduler.h"
#include "tokenizer/tokenizer.h"
#include "tools/common.h"
#include "tools/tool.h"

namespace dl::tools {

namespace {

using json = nlohmann::ordered_json;

struct BatchArgs {
    ModelArgs model;
    SamplingArgs sampling;
    std::string input, output;
    int64_t parallel = 8;
    int64_t n_predict = 128;
    int64_t token_budget = 512;
    bool ignore_eos = false;
};

constexpr size_t kMaxLines = 1'000'000;

struct Line {
    json id;  // null when the line has none
    GenerationRequest request;
};

// A field of a line, checked: the error names the line and the field.
template <typename T>
T field(const json& j, const char* name, T fallback, size_t line) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) return fallback;
    try {
        return it->get<T>();
    } catch (const std::exception&) {
        fail("line {}: \"{}\" has the wrong type ({})", line, name, it->type_name());
    }
}

std::vector<Line> read_lines(const std::string& text, const Engine& engine, const BatchArgs& a,
                             const SamplerParams& base) {
    const tokenizer::Tokenizer& tok = engine.tokenizer();
    const ChatTemplater templater(tok, engine.model().hp.arch_name);
    std::shared_ptr<const TokenTable> token_table;  // made for the first JSON-constrained line
    std::vector<Line> lines;
    std::istringstream in(text);
    std::string raw;
    size_t n = 0;
    while (std::getline(in, raw)) {
        ++n;
        if (raw.find_first_not_of(" \t\r") == std::string::npos) continue;
        if (lines.size() >= kMaxLines) fail("more than {} prompts in one file", kMaxLines);
        json j;
        try {
            j = json::parse(raw);
        } catch (const json::parse_error& e) {
            // (Its what() quotes the line's bytes, which may not be text.)
            fail("line {} is not JSON (at byte {} of it)", n, e.byte);
        }
        if (!j.is_object()) fail("line {} must be a JSON object", n);
        Line l;
        if (auto it = j.find("id"); it != j.end()) l.id = *it;
        GenerationRequest& r = l.request;
        const bool has_prompt = j.contains("prompt"), has_messages = j.contains("messages");
        if (has_prompt == has_messages) fail("line {} needs either \"prompt\" or \"messages\"", n);
        // response_format: text, json_object, or json_schema with its schema.
        bool json_object = false;
        std::shared_ptr<const JsonSchema> schema;
        if (auto it = j.find("response_format"); it != j.end() && !it->is_null()) {
            const json f = *it;
            const std::string type = f.is_object() && f.contains("type") && f["type"].is_string()
                                         ? f["type"].get<std::string>()
                                         : "";
            if (type == "json_schema" && f.contains("json_schema") &&
                f["json_schema"].is_object() && f["json_schema"].contains("schema")) {
                try {
                    schema = JsonSchema::compile(f["json_schema"]["schema"]);
                } catch (const Error& e) {
                    fail("line {}: {}", n, e.what());
                }
            } else if (type != "json_object" && type != "text") {
                fail(
                    "line {}: \"response_format\" must be {{\"type\": \"text\"}}, "
                    "{{\"type\": \"json_object\"}} or {{\"type\": \"json_schema\", "
                    "\"json_schema\": {{\"schema\": ...}}}}",
                    n);
            }
            json_object = type != "text";
        }
        ThinkBlock think(false, false);
        if (has_prompt) {
            if (!j["prompt"].is_string()) fail("line {}: \"prompt\" must be a string", n);
            r.prompt = tok.encode(j["prompt"].get<std::string>(), true, false);
        } else {
            // The model's own chat template; only its markup makes control tokens.
            ChatRequest chat;
            chat.messages = j["messages"];
            if (auto it = j.find("tools"); it != j.end()) chat.tools = *it;
            if (auto it = j.find("chat_template_kwargs"); it != j.end()) chat.kwargs = *it;
            if (!chat.messages.is_array() || chat.messages.empty())
                fail("line {}: \"messages\" must be a non-empty array", n);
            try {
                const ChatPrompt p = templater.prompt(chat);
                r.prompt = p.tokens;
                const ChatOutputFormat f =
                    ChatOutputFormat::detect(templater.source(), templater.arch(), p.text);
                think = f.think_block();
            } catch (const Error& e) {
                fail("line {}: {}", n, e.what());
            }
        }
        if (json_object) {
            if (!token_table) token_table = std::make_shared<const TokenTable>(tok);
            r.constraint = std::make_shared<JsonConstraint>(token_table, think, schema);
        }
        if (r.prompt.empty()) fail("line {}: the prompt is empty", n);
        if ((int64_t)r.prompt.size() >= engine.n_ctx())
            fail("line {}: the prompt of {} tokens does not fit the context of {} (-c)", n,
                 r.prompt.size(), engine.n_ctx());
        r.max_tokens = field<int64_t>(j, "max_tokens", a.n_predict, n);
        if (r.max_tokens == 0 || r.max_tokens < -1)
            fail("line {}: max_tokens must be -1 or at least 1, not {}", n, r.max_tokens);
        r.sampling = base;
        r.sampling.seed = field<uint64_t>(j, "seed", base.seed, n);
        r.sampling.temperature = field<float>(j, "temperature", base.temperature, n);
        r.sampling.top_k = field<int32_t>(j, "top_k", base.top_k, n);
        r.sampling.top_p = field<float>(j, "top_p", base.top_p, n);
        r.sampling.min_p = field<float>(j, "min_p", base.min_p, n);
        if (!(r.sampling.temperature >= 0 && r.sampling.temperature <= 100) ||
            !(r.sampling.top_p >= 0 && r.sampling.top_p <= 1) ||
            !(r.sampling.min_p >= 0 && r.sampling.min_p <= 1))
            fail("line {}: temperature must be 0 to 100, top_p and min_p 0 to 1", n);
        r.ignore_eos = a.ignore_eos;
        lines.push_back(std::move(l));
    }
    if (lines.empty()) fail("{} holds no prompts", a.input);
    return lines;
}

// Results arrive in any order; they are written in input order.
struct Outcome {
    std::vector<int32_t> tokens;
    GenerationEvent done;
    bool finished = false;
};

int batch(const BatchArgs& a) {
    if (a.input.empty()) fail("no input: give one with -i prompts.jsonl");
    if (a.output.empty()) fail("no output: give one with -o out.jsonl");
    if (a.parallel < 1 || a.parallel > 1024)
        fail("--parallel must be 1 to 1024, not {}", a.parallel);
    if (a.token_budget < 1) fail("--batch-tokens must be at least 1, not {}", a.token_budget);
    if (a.n_predict == 0 || a.n_predict < -1)
        fail("-n must be -1 (until the end of generation) or at least 1, not {}", a.n_predict);
    check_output_path(a.output);
    const std::string text = read_text_file(a.input);
    const SamplerParams base = a.sampling.params();

    ModelArgs model = a.model;
    model.sequences = a.parallel;
    std::unique_ptr<Engine> engine = model.open();
    const tokenizer::Tokenizer& tok = engine->tokenizer();
    std::vector<Line> lines = read_lines(text, *engine, a, base);
    OutputFile out(a.output);

    SchedulerOptions so;
    so.parallel = std::min<int64_t>(a.parallel, (int64_t)lines.size());
    so.n_ctx = engine->n_ctx();
    so.token_budget = a.token_budget;
    so.queue_limit = (int64_t)lines.size();
    so.is_eog = [&tok](int32_t t) { return tok.is_eog(t); };
    std::fprintf(stderr, "deltallm: %zu prompts, %lld at a time on %s\n", lines.size(),
                 (long long)so.parallel, engine->executor().name().c_str());

    std::vector<Outcome> outcomes(lines.size());
    std::mutex m;
    std::condition_variable cv;
    size_t n_done = 0;
    int64_t generated = 0;
    const bool tty = isatty(STDERR_FILENO) == 1;
    const auto t0 = std::chrono::steady_clock::now();
    auto progress = [&](bool last) {
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "%s[%zu/%zu] %lld tokens generated, %.1f tokens/s%s", tty ? "\r" : "",
                     n_done, lines.size(), (long long)generated, s > 0 ? generated / s : 0.0,
                     tty && !last ? "" : "\n");
    };
    {
        Scheduler sched(engine->executor(), so);
        for (size_t i = 0; i < lines.size(); ++i) {
            auto sink = [&, i](const GenerationEvent& e) {
                std::lock_guard lock(m);
                Outcome& o = outcomes[i];
                if (e.kind == GenerationEvent::Kind::token) {
                    o.tokens.push_back(e.token);
                    ++generated;
                    return true;
                }
                o.done = e;
                o.finished = true;
                ++n_done;
                if (tty || n_done == lines.size() || n_done % 64 == 0) progress(false);
                cv.notify_all();
                return true;
            };
            if (sched.submit(lines[i].request, sink) == 0)
                fail("the scheduler refused prompt {}", i + 1);
        }
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return n_done == lines.size(); });
    }
    if (tty) std::fputc('\n', stderr);

    std::string body;
    size_t failed = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
        const Outcome& o = outcomes[i];
        // The text as `run` prints it: whole UTF-8 characters, the end-of-generation token left
        // out.
        tokenizer::StreamDecoder dec(tok);
        std::string reply;
        for (size_t k = 0; k < o.tokens.size(); ++k) {
            if (k + 1 == o.tokens.size() && o.done.finish == FinishReason::eog) break;
            reply += dec.push(o.tokens[k]);
        }
        reply += dec.flush();
        json j;
        j["index"] = i;
        if (!lines[i].id.is_null()) j["id"] = lines[i].id;
        j["text"] = reply;
        j["finish_reason"] = finish_reason_name(o.done.finish);
        if (o.done.finish == FinishReason::error) {
            j["error"] = o.done.error;
            ++failed;
        }
        j["prompt_tokens"] = o.done.prompt_tokens;
        j["completion_tokens"] = o.done.generated_tokens;
        j["time_to_first_token_s"] = o.done.first_token_seconds;
        j["total_s"] = o.done.total_seconds;
        // Invalid UTF-8 (a reply cut inside a character) is replaced, never an exception.
        body += j.dump(-1, ' ', false, json::error_handler_t::replace);
        body += '\n';
    }
    for (size_t off = 0; off < body.size();) {
        const ssize_t w = ::write(out.fd(), body.data() + off, body.size() - off);
        if (w < 0) {
            if (errno == EINTR) continue;
            fail("cannot write {}: {}", a.output, std::strerror(errno));
        }
        off += (size_t)w;
    }
    out.commit();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "deltallm: %zu prompts, %lld tokens generated in %.2f s (%.1f tokens/s)\n",
                 lines.size(), (long long)generated, s, s > 0 ? generated / s : 0.0);
    if (failed > 0) {
        std::fprintf(stderr, "deltallm: %zu prompts failed; see \"error\" in %s\n", failed,
                     a.output.c_str());
        return 1;
    }
    return 0;
}

Registrar reg("batch", "generate for every prompt of a JSONL file, many at once",
              [](CLI::App& app) -> Run {
                  auto a = std::make_shared<BatchArgs>();
                  a->model.add_to(app);
                  app.add_option("-i,--input", a->input,
                                 "JSONL: {\"prompt\": ...} or {\"messages\": [...]} per line");
                  app.add_option("-o,--output", a->output, "JSONL results, in input order");
                  app.add_option("--parallel", a->parallel, "sequences generated at once")
                      ->capture_default_str();
                  app.add_option("--batch-tokens", a->token_budget,
                                 "tokens per step (decodes and prompt chunks) while sequences "
                                 "generate; a step with none generating reads up to 2048 if more")
                      ->capture_default_str();
                  app.add_option("-n,--n-predict", a->n_predict,
                                 "tokens per prompt unless its line says (-1: until the end)")
                      ->capture_default_str();
                  a->sampling.add_to(app);
                  app.add_flag("--ignore-eos", a->ignore_eos,
                               "do not stop at end-of-generation tokens");
                  return [a] { return batch(*a); };
              });

}  // namespace

}  // namespace dl::tools
