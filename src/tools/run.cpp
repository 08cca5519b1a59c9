// `deltallm run`: generate text from a prompt, streaming it to stdout, with the speeds on stderr;
// plus the parity tooling (token ids in and out, logits dumped as .npy).
#include <unistd.h>

#include <cstdio>
#include <deque>
#include <map>
#include <optional>

#include "core/error.h"
#include "core/output_file.h"
#include "core/printable.h"
#include "engine/npy.h"
#include "tools/common.h"
#include "tools/tool.h"

namespace dl::tools {

namespace {

struct RunArgs {
    ModelArgs model;
    SamplingArgs sampling;
    std::string prompt, prompt_file, prompt_ids, dump_logits, dump_positions;
    bool prompt_given = false;
    bool dump_given = false;     // --dump-logits was on the command line (perhaps empty)
    bool parse_special = false;  // control-token text in the prompt becomes control tokens
    int64_t n_predict = 128;
    bool print_ids = false;
    bool ignore_eos = false;
};

// Keeps the logits rows --dump-positions asks for: rows counted from the start are taken as
// they pass, rows counted from the end are kept in a window of the last few.
class PositionPicker {
  public:
    PositionPicker(std::vector<int64_t> wanted, int64_t n_vocab)
        : wanted_(std::move(wanted)), n_vocab_(n_vocab) {
        for (int64_t w : wanted_)
            if (w < 0) tail_ = std::max(tail_, -w);
    }
    void add(std::span<const float> row) {
        for (int64_t w : wanted_)
            if (w == seen_) front_[w].assign(row.begin(), row.end());
        if (tail_ > 0) {
            last_.emplace_back(row.begin(), row.end());
            if ((int64_t)last_.size() > tail_) last_.pop_front();
        }
        ++seen_;
    }
    void write(const std::string& path) const {
        std::vector<float> out;
        for (int64_t w : wanted_) {
            int64_t idx = w < 0 ? seen_ + w : w;
            if (idx < 0 || idx >= seen_)
                fail("--dump-positions {} is outside the {} evaluated positions", w, seen_);
            const std::vector<float>& row =
                w < 0 ? last_[(size_t)((int64_t)last_.size() + w)] : front_.at(w);
            out.insert(out.end(), row.begin(), row.end());
        }
        const int64_t shape[2] = {(int64_t)wanted_.size(), n_vocab_};
        npy::write_f32(path, out, shape);
    }

  private:
    std::vector<int64_t> wanted_;
    int64_t n_vocab_;
    int64_t tail_ = 0, seen_ = 0;
    std::map<int64_t, std::vector<float>> front_;
    std::deque<std::vector<float>> last_;
};

int run(const RunArgs& a) {
    int sources = (a.prompt_given ? 1 : 0) + (!a.prompt_file.empty()) + (!a.prompt_ids.empty());
    if (sources > 1) fail("give the prompt one way only: -p, -f or --prompt-ids");
    if (sources == 0) fail("no prompt: give one with -p TEXT, -f FILE or --prompt-ids 1,2,3");
    if (a.n_predict < -1)
        fail("-n must be -1 (until the end of generation) or more, not {}", a.n_predict);
    if (a.dump_given && a.dump_logits.empty())
        fail("--dump-logits needs a file name, and '' is none");
    if (!a.dump_logits.empty()) check_output_path(a.dump_logits);
    if (!a.dump_positions.empty() && a.dump_logits.empty())
        fail("--dump-positions needs --dump-logits FILE");
    SamplerParams sp = a.sampling.params();
    std::vector<int64_t> positions;
    if (!a.dump_positions.empty()) positions = parse_int_list(a.dump_positions, "--dump-positions");
    std::vector<int64_t> ids;
    if (!a.prompt_ids.empty()) ids = parse_int_list(a.prompt_ids, "--prompt-ids");

    std::unique_ptr<Engine> engine = a.model.open();
    const Model& model = engine->model();
    const int64_t n_vocab = model.hp.n_vocab;
    std::fprintf(stderr, "deltallm: loaded %s (%s, %s) on %s in %.3f s\n",
                 printable(model.hp.model_name.empty() ? "model" : model.hp.model_name).c_str(),
                 printable(model.hp.arch_name).c_str(), human_bytes(model.weight_bytes()).c_str(),
                 engine->executor().name().c_str(), engine->load_seconds());

    std::vector<int32_t> prompt;
    if (!a.prompt_ids.empty()) {
        for (int64_t id : ids) {
            if (id < 0 || id >= n_vocab)
                fail("--prompt-ids: token id {} is out of range (the vocabulary has {})", id,
                     n_vocab);
            prompt.push_back((int32_t)id);
        }
    } else {
        std::string text = a.prompt_given ? a.prompt : read_text_file(a.prompt_file);
        // The prompt is text: "<|im_end|>" typed in it is those characters, not the control
        // token, unless --parse-special asks for it (hand-written templates).
        prompt = engine->tokenizer().encode(text, /*add_special=*/true, a.parse_special);
        if (prompt.empty()) fail("the prompt is empty");
    }

    GenerateOptions go;
    go.n_predict = a.n_predict;
    if (engine->has_tokenizer() && !a.ignore_eos) {
        const tokenizer::Tokenizer* tok = &engine->tokenizer();
        go.is_eog = [tok](int32_t t) { return tok->is_eog(t); };
    }
    std::unique_ptr<npy::RowWriter> all_rows;
    std::unique_ptr<PositionPicker> picker;
    if (!a.dump_logits.empty()) {
        go.all_prompt_logits = true;
        if (positions.empty()) {
            all_rows = std::make_unique<npy::RowWriter>(a.dump_logits, n_vocab);
            go.on_logits = [&](int64_t, std::span<const float> row) { all_rows->append(row); };
        } else {
            picker = std::make_unique<PositionPicker>(positions, n_vocab);
            go.on_logits = [&](int64_t, std::span<const float> row) { picker->add(row); };
        }
    }

    std::optional<tokenizer::StreamDecoder> decoder;
    if (!a.print_ids) decoder.emplace(engine->tokenizer());
    bool first = true;
    auto on_token = [&](int32_t t) {
        if (a.print_ids) {
            std::printf(first ? "%d" : ",%d", t);
        } else if (!(go.is_eog && go.is_eog(t))) {
            std::string piece = decoder->push(t);
            std::fwrite(piece.data(), 1, piece.size(), stdout);
        }
        first = false;
        std::fflush(stdout);
        return true;
    };

    Sampler sampler(sp);
    announce_context(*engine);
    auto session = engine->new_session();
    GenerateStats st = generate(engine->executor(), *session, sampler, prompt, go, on_token);
    if (decoder) {
        std::string rest = decoder->flush();
        std::fwrite(rest.data(), 1, rest.size(), stdout);
    }
    std::fputc('\n', stdout);
    std::fflush(stdout);

    if (all_rows) all_rows->finish();
    if (picker) picker->write(a.dump_logits);
    if (st.stopped_at_context)
        std::fprintf(stderr, "deltallm: stopped at the end of the context (%lld tokens)\n",
                     (long long)session->n_ctx);
    print_speeds(st);
    return 0;
}

Registrar reg("run", "generate text from a prompt", [](CLI::App& app) -> Run {
    auto a = std::make_shared<RunArgs>();
    a->model.add_to(app);
    auto* p = app.add_option("-p,--prompt", a->prompt, "the prompt text");
    app.add_option("-f,--file", a->prompt_file, "read the prompt from a file");
    app.add_option("--prompt-ids", a->prompt_ids, "the prompt as token ids: 1,2,3");
    app.add_option("-n,--n-predict", a->n_predict, "tokens to generate (-1: until the end)")
        ->capture_default_str();
    a->sampling.add_to(app);
    app.add_flag("--print-ids", a->print_ids,
                 "print the generated token ids (comma separated) instead of text");
    app.add_flag("--ignore-eos", a->ignore_eos, "do not stop at end-of-generation tokens");
    app.add_flag("--parse-special", a->parse_special,
                 "read control-token text in the prompt (<|im_start|>, ...) as those tokens");
    auto* dump = app.add_option(
        "--dump-logits", a->dump_logits,
        "write the logits of every evaluated position to FILE (.npy, float32 [positions, vocab])");
    app.add_option(
        "--dump-positions", a->dump_positions,
        "with --dump-logits: only these positions, e.g. 0,5,-1 (negative: from the end)");
    return [a, p, dump] {
        a->prompt_given = p->count() > 0;
        a->dump_given = dump->count() > 0;
        return run(*a);
    };
});

}  // namespace

}  // namespace dl::tools
