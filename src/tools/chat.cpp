// `deltallm chat`: a conversation through the model's own chat template (or --chat-template-file).
// The session is kept between turns: each turn sends only the tokens the session does not hold
// yet. Works as a REPL on a terminal and as a filter when stdin is a pipe (one user turn per
// line). Reasoning (<think>...</think>) goes to stderr, the answer to stdout.
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "core/printable.h"
#include "engine/chat_output.h"
#include "engine/chat_template.h"
#include "tokenizer/utf8.h"
#include "tools/common.h"
#include "tools/tool.h"

namespace dl::tools {

namespace {

using ojson = nlohmann::ordered_json;

struct ChatArgs {
    ModelArgs model;
    SamplingArgs sampling;
    std::string system;
    std::string think = "auto";
    std::string template_file;
    int64_t n_predict = 1024;
};

// The text with each byte that is not part of a UTF-8 character replaced by U+FFFD.
std::string to_utf8(const std::string& s) {
    std::string out;
    const auto* p = reinterpret_cast<const uint8_t*>(s.data());
    for (size_t i = 0; i < s.size();) {
        size_t n = tokenizer::utf8::char_len(p + i, s.size() - i);
        if (n == 0) {
            out += tokenizer::utf8::kReplacement;
            ++i;
        } else {
            out.append(s, i, n);
            i += n;
        }
    }
    return out;
}

// One conversation: the messages so far and the executor's session holding them.
//
// Each turn renders the whole conversation through the template and sends only what follows
// the text the session already holds. The session's tokens are the model's own (the reply as
// sampled), which a fresh tokenization of the same text need not reproduce, so the two are
// compared as text, at a token boundary of the rendering. Templates may render history
// differently from how it was generated (Qwen3 and Qwen3.5 drop earlier turns' reasoning and
// empty thinking blocks): then the session goes back to a snapshot taken at the end of the last
// user message, if the rendering still starts with that, or else starts over with the whole
// conversation, so that the model always sees exactly what its template makes of it.
class Conversation {
  public:
    Conversation(Engine& engine, const ChatArgs& a, SamplerParams sp, const ChatTemplater& tmpl,
                 ojson kwargs)
        : engine_(engine), args_(a), sampler_(sp), templater_(tmpl), kwargs_(std::move(kwargs)) {
        reset();
    }

    void reset() {
        session_ = engine_.new_session();
        sampler_.reset();
        messages_ = ojson::array();
        if (!args_.system.empty())
            messages_.push_back({{"role", "system"}, {"content", args_.system}});
        held_.clear();
        pending_.clear();
        snapshot_.reset();
    }

    // Sends one user message and streams the reply to stdout (its reasoning to stderr).
    void turn(const std::string& user) {
        const tokenizer::Tokenizer& tok = engine_.tokenizer();
        ChatRequest r;
        r.messages = messages_;
        r.messages.push_back({{"role", "user"}, {"content", user}});
        r.kwargs = kwargs_;
        ChatPrompt p;
        try {
            p = templater_.prompt(r);
        } catch (const Error&) {
            // A reply cut inside a character is kept as the model wrote it (so that the session
            // stays), which a template's string operations may refuse: then as UTF-8.
            for (ojson& m : r.messages) m["content"] = to_utf8(m["content"].get<std::string>());
            p = templater_.prompt(r);
        }

        Executor& ex = engine_.executor();
        size_t kept = kept_prefix(p.tokens, held_);
        if (kept == SIZE_MAX && snapshot_) {
            const size_t k = kept_prefix(p.tokens, snapshot_text_);
            if (k != SIZE_MAX && ex.restore(*session_, *snapshot_)) {
                held_ = snapshot_text_;
                pending_.clear();
                kept = k;
                log::debug("chat: the session goes back to the end of the last user turn");
            }
        }
        if (kept == SIZE_MAX)
            log::debug(
                "chat: the rendering parts from the session: the conversation is prefilled again");
        std::vector<int32_t> prompt;
        if (kept != SIZE_MAX) {
            prompt = pending_;
            prompt.insert(prompt.end(), p.tokens.begin() + kept, p.tokens.end());
            if (session_->n_past + (int64_t)prompt.size() > session_->n_ctx)
                fail(
                    "the turn of {} tokens does not fit the context of {} tokens ({} already used)",
                    prompt.size(), session_->n_ctx, session_->n_past);
        } else {
            if ((int64_t)p.tokens.size() >= session_->n_ctx)
                fail("the conversation ({} tokens) no longer fits the context of {}",
                     p.tokens.size(), session_->n_ctx);
            session_ = engine_.new_session();
            snapshot_.reset();
            held_.clear();
            pending_.clear();
            kept = 0;
            prompt = p.tokens;
        }

        // The session is kept at the end of the user's turn too, before the generation prompt:
        // templates that render past turns differently from how they were generated still
        // render the conversation up to there the same next turn, so only the rest is prefilled
        // again. That part is prefilled on its own for the snapshot.
        const size_t turn_end = user_turn_end(r, p.tokens);
        int64_t n_first = 0;
        double first_seconds = 0;
        if (turn_end > kept && turn_end < p.tokens.size()) {
            const size_t split = pending_.size() + (turn_end - kept);
            std::vector<int32_t> first(prompt.begin(), prompt.begin() + split);
            std::vector<float> logits;
            const auto t0 = std::chrono::steady_clock::now();
            ex.prefill(*session_, first, LogitsRows::last, logits);
            first_seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            n_first = (int64_t)first.size();
            for (size_t i = 0; i < first.size(); ++i) {
                sampler_.accept(first[i]);
                if (i >= pending_.size()) held_ += tok.token_text(first[i]);
            }
            pending_.clear();
            prompt.erase(prompt.begin(), prompt.begin() + split);
            snapshot_ = ex.snapshot(*session_);
            snapshot_text_ = held_;
        }

        ChatOutputFormat format =
            ChatOutputFormat::detect(templater_.source(), templater_.arch(), p.text);
        format.tool_calls = ToolCallSyntax::none;  // no tools are offered here
        ChatOutputParser parser(format);
        bool reasoning_shown = false;
        auto show = [&](const ChatDelta& d) {
            if (!d.reasoning_content.empty()) {
                std::fputs(d.reasoning_content.c_str(), stderr);
                reasoning_shown = true;
            }
            if (!d.content.empty()) {
                if (reasoning_shown) std::fputc('\n', stderr), reasoning_shown = false;
                std::fwrite(d.content.data(), 1, d.content.size(), stdout);
                std::fflush(stdout);
            }
        };

        GenerateOptions go;
        go.n_predict = args_.n_predict;
        go.is_eog = [&tok](int32_t t) { return tok.is_eog(t); };
        tokenizer::StreamDecoder dec(tok);
        std::vector<int32_t> reply;
        bool ended = false;
        auto on_token = [&](int32_t t) {
            if (tok.is_eog(t)) {
                ended = true;
                return true;
            }
            reply.push_back(t);
            show(parser.push(dec.push(t)));
            return true;
        };
        GenerateStats st = generate(ex, *session_, sampler_, prompt, go, on_token);
        st.n_prompt += n_first;
        st.prompt_seconds += first_seconds;
        show(parser.push(dec.flush()));
        show(parser.finish().delta);
        if (reasoning_shown) std::fputc('\n', stderr);
        std::fputc('\n', stdout);
        std::fflush(stdout);

        // The session now holds the prompt and the reply but its last token (a sampled token is
        // fed only when another follows); that one is sent first next turn. An end-of-turn
        // token is not kept: the template writes the turn's end itself.
        // (held_ has the text of pending_ already.)
        for (size_t i = pending_.size(); i < prompt.size(); ++i) held_ += tok.token_text(prompt[i]);
        pending_.clear();
        std::string text;
        for (int32_t t : reply) text += tok.token_text(t);
        held_ += text;
        if (!ended && !reply.empty()) pending_.push_back(reply.back());
        // The reply goes into the history as the model wrote it (thinking included), for the
        // template to render as it renders history.
        messages_ = r.messages;
        messages_.push_back({{"role", "assistant"}, {"content", text}});
        if (st.stopped_at_context)
            std::fprintf(stderr,
                         "deltallm: the context is full (%lld tokens); /reset to start over\n",
                         (long long)session_->n_ctx);
        if (log::level() <= log::Level::debug) print_speeds(st);
    }

  private:
    // How many tokens of the rendering spell the text the session holds (their ends must fall
    // together), or SIZE_MAX when the rendering does not start with that text.
    size_t kept_prefix(const std::vector<int32_t>& tokens, const std::string& held) const {
        const tokenizer::Tokenizer& tok = engine_.tokenizer();
        size_t at = 0;
        for (size_t k = 0; k <= tokens.size(); ++k) {
            if (at == held.size()) return k;
            if (k == tokens.size()) break;
            const std::string t = tok.token_text(tokens[k]);
            if (held.compare(at, t.size(), t) != 0) break;
            at += t.size();
        }
        return SIZE_MAX;
    }

    // The tokens of the rendering up to the end of the new user message: where it parts from
    // the same conversation rendered without a generation prompt.
    size_t user_turn_end(const ChatRequest& r, const std::vector<int32_t>& tokens) const {
        ChatRequest without = r;
        without.add_generation_prompt = false;
        try {
            const std::vector<int32_t> t = templater_.prompt(without).tokens;
            size_t n = 0;
            while (n < t.size() && n < tokens.size() && t[n] == tokens[n]) ++n;
            return n;
        } catch (const Error&) {
            return 0;
        }
    }

    Engine& engine_;
    const ChatArgs& args_;
    Sampler sampler_;
    const ChatTemplater& templater_;
    ojson kwargs_;
    std::unique_ptr<SessionState> session_;
    ojson messages_;
    std::string held_;              // the text of the tokens in the session, and of pending_
    std::vector<int32_t> pending_;  // the reply's last token, sampled but not yet fed
    std::unique_ptr<SessionSnapshot> snapshot_;  // the session at the end of the last user turn
    std::string snapshot_text_;                  // the text it holds
};

int chat(const ChatArgs& a) {
    if (a.n_predict < -1)
        fail("-n must be -1 (until the end of the turn) or more, not {}", a.n_predict);
    // --think maps to the templates' enable_thinking switch; auto leaves it unset.
    ojson kwargs = ojson::object();
    if (a.think == "on")
        kwargs["enable_thinking"] = true;
    else if (a.think == "off")
        kwargs["enable_thinking"] = false;
    else if (a.think != "auto")
        fail("--think must be auto, on or off, not '{}'", a.think);
    SamplerParams sp = a.sampling.params();
    const std::string template_source =
        a.template_file.empty() ? std::string() : read_text_file(a.template_file);

    std::unique_ptr<Engine> engine = a.model.open();
    // Fail now, not at the first turn.
    ChatTemplater templater(engine->tokenizer(), engine->model().hp.arch_name, template_source);
    const bool interactive = isatty(STDIN_FILENO) == 1;
    if (interactive)
        std::fprintf(
            stderr, "deltallm: chatting with %s on %s. /reset starts over, /exit quits.\n",
            printable(engine->model().hp.model_name.empty() ? engine->model().hp.arch_name
                                                            : engine->model().hp.model_name)
                .c_str(),
            engine->executor().name().c_str());

    announce_context(*engine);
    Conversation conv(*engine, a, sp, templater, kwargs);
    std::string line;
    bool failed_turns = false;
    for (;;) {
        if (interactive) {
            std::fputs("> ", stderr);
            std::fflush(stderr);
        }
        if (!std::getline(std::cin, line)) break;
        while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
        if (line.empty()) continue;
        // A command with stray spaces around it is still the command, not a message.
        std::string command = line;
        while (!command.empty() && std::isspace((unsigned char)command.back())) command.pop_back();
        while (!command.empty() && std::isspace((unsigned char)command.front()))
            command.erase(0, 1);
        if (command == "/exit" || command == "/quit") break;
        if (command == "/reset") {
            conv.reset();
            if (interactive) std::fputs("deltallm: conversation reset\n", stderr);
            continue;
        }
        if (command == "/help") {
            std::fputs("/reset starts a new conversation, /exit quits\n", stderr);
            continue;
        }
        try {
            conv.turn(line);
        } catch (const Error& e) {
            // A turn that cannot be served (the context is full) leaves the session as it was:
            // the conversation goes on, and /reset starts over. A script still learns of it
            // from the exit code.
            std::fprintf(stderr, "error: %s\n", printable(e.what()).c_str());
            std::fputs("deltallm: the conversation is kept; /reset starts over\n", stderr);
            failed_turns = true;
        }
    }
    return failed_turns ? 1 : 0;
}

Registrar reg("chat", "chat with a model in its chat format (stdin: one message per line)",
              [](CLI::App& app) -> Run {
                  auto a = std::make_shared<ChatArgs>();
                  a->model.add_to(app);
                  a->sampling.add_to(app);
                  app.add_option("-s,--system", a->system, "system message");
                  app.add_option("--think", a->think, "thinking block: auto, on or off")
                      ->capture_default_str();
                  app.add_option("--chat-template-file", a->template_file,
                                 "a Jinja chat template to use instead of the model's");
                  app.add_option("-n,--n-predict", a->n_predict,
                                 "most tokens per reply (-1: until the end of the turn)")
                      ->capture_default_str();
                  return [a] { return chat(*a); };
              });

}  // namespace

}  // namespace dl::tools
