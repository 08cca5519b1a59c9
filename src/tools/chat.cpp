// `deltallm chat`: a conversation in the model's chat format. The session is kept between turns:
// each turn appends only its own tokens (the history is never prefilled again). Works as a REPL
// on a terminal and as a filter when stdin is a pipe (one user turn per line).
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <iostream>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "core/printable.h"
#include "tools/common.h"
#include "tools/tool.h"

namespace dl::tools {

namespace {

struct ChatArgs {
    ModelArgs model;
    SamplingArgs sampling;
    std::string system;
    std::string think = "auto";
    int64_t n_predict = 1024;
};

// One conversation: the executor's session plus what the next turn must start with.
class Conversation {
  public:
    Conversation(Engine& engine, const ChatArgs& a, SamplerParams sp)
        : engine_(engine), args_(a), sampler_(sp) {
        reset();
    }

    void reset() {
        session_ = engine_.new_session();
        sampler_.reset();
        pending_.clear();
        turns_ = 0;
    }

    // Sends one user message and streams the reply to stdout.
    void turn(const std::string& user) {
        const ChatFormat& fmt = engine_.chat_format();
        const tokenizer::Tokenizer& tok = engine_.tokenizer();
        std::vector<ChatPiece> pieces;
        auto add = [&](std::vector<ChatPiece> more) {
            pieces.insert(pieces.end(), more.begin(), more.end());
        };
        if (turns_ == 0 && !args_.system.empty()) add(fmt.message_pieces({"system", args_.system}));
        if (turns_ > 0) add({{fmt.assistant_end(), true}});
        add(fmt.message_pieces({"user", user}));
        add({{fmt.assistant_prefix(), true}});
        // Only the format's markup may make control tokens; -s and the user's lines are text.
        std::vector<int32_t> prompt = pending_;
        bool first = session_->n_past == 0 && pending_.empty();
        for (const ChatPiece& p : pieces) {
            if (p.text.empty()) continue;
            std::vector<int32_t> ids = tok.encode(p.text, /*add_special=*/first, p.markup);
            prompt.insert(prompt.end(), ids.begin(), ids.end());
            first = false;
        }

        GenerateOptions go;
        go.n_predict = args_.n_predict;
        go.is_eog = [&tok](int32_t t) { return tok.is_eog(t); };
        tokenizer::StreamDecoder dec(tok);
        int32_t last = -1;
        bool ended = false;
        auto on_token = [&](int32_t t) {
            last = t;
            if (tok.is_eog(t)) {
                ended = true;
                return true;
            }
            std::string piece = dec.push(t);
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
            return true;
        };
        GenerateStats st = generate(engine_.executor(), *session_, sampler_, prompt, go, on_token);
        std::string rest = dec.flush();
        std::fwrite(rest.data(), 1, rest.size(), stdout);
        std::fputc('\n', stdout);
        std::fflush(stdout);
        // The last sampled token was not fed to the model. An end-of-turn token is written again
        // by assistant_end(); any other token must go in before it.
        pending_.clear();
        if (!ended && last >= 0) pending_.push_back(last);
        ++turns_;
        if (st.stopped_at_context)
            std::fprintf(stderr,
                         "deltallm: the context is full (%lld tokens); /reset to start over\n",
                         (long long)session_->n_ctx);
        if (log::level() <= log::Level::debug) print_speeds(st);
    }

  private:
    Engine& engine_;
    const ChatArgs& args_;
    Sampler sampler_;
    std::unique_ptr<SessionState> session_;
    std::vector<int32_t> pending_;
    int turns_ = 0;
};

int chat(const ChatArgs& a) {
    if (a.n_predict < -1)
        fail("-n must be -1 (until the end of the turn) or more, not {}", a.n_predict);
    Thinking thinking = Thinking::model_default;
    if (a.think == "on")
        thinking = Thinking::on;
    else if (a.think == "off")
        thinking = Thinking::off;
    else if (a.think != "auto")
        fail("--think must be auto, on or off, not '{}'", a.think);
    SamplerParams sp = a.sampling.params();

    std::unique_ptr<Engine> engine = a.model.open();
    engine->tokenizer();  // fail now, not at the first turn
    engine->chat_format().set_thinking(thinking);
    const bool interactive = isatty(STDIN_FILENO) == 1;
    if (interactive)
        std::fprintf(
            stderr, "deltallm: chatting with %s on %s. /reset starts over, /exit quits.\n",
            printable(engine->model().hp.model_name.empty() ? engine->model().hp.arch_name
                                                            : engine->model().hp.model_name)
                .c_str(),
            engine->executor().name().c_str());

    announce_context(*engine);
    Conversation conv(*engine, a, sp);
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
                  app.add_option("-n,--n-predict", a->n_predict,
                                 "most tokens per reply (-1: until the end of the turn)")
                      ->capture_default_str();
                  return [a] { return chat(*a); };
              });

}  // namespace

}  // namespace dl::tools
