// llama.cpp's perplexity of a GGUF file on a text, through llama.h, with llama-perplexity's
// semantics (the statistic `deltallm perplexity` reports): the text tokenized once (BOS first
// where the model adds one, and each window's first token replaced by BOS then), cut into
// non-overlapping windows of c tokens, the second half of each window scored; PPL and its error.
//   peer_perplexity -m MODEL.gguf -f TEXT [-c 512] [--chunks N] [-t THREADS]
// The npm packages carry llama.cpp's libraries but not its tools; this is the few lines of
// llama-perplexity's default path that the comparison needs.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

[[noreturn]] void die(const std::string& m) {
    std::fprintf(stderr, "peer_perplexity: %s\n", m.c_str());
    std::exit(1);
}

void quiet(ggml_log_level level, const char* text, void*) {
    if (level >= GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path, text_path;
    int n_ctx = 512, n_chunks = -1, threads = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string f = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) die("missing value after " + f);
            return argv[++i];
        };
        if (f == "-m")
            model_path = next();
        else if (f == "-f")
            text_path = next();
        else if (f == "-c")
            n_ctx = std::stoi(next());
        else if (f == "--chunks")
            n_chunks = std::stoi(next());
        else if (f == "-t")
            threads = std::stoi(next());
        else
            die("unknown argument " + f);
    }
    if (model_path.empty() || text_path.empty() || n_ctx < 16)
        die("usage: -m MODEL -f TEXT [-c 512]");
    std::ifstream in(text_path, std::ios::binary);
    if (!in) die("cannot read " + text_path);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();

    llama_log_set(quiet, nullptr);
    ggml_backend_load_all();
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
    if (!model) die("llama.cpp refused to load " + model_path);
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)n_ctx;
    cp.n_ubatch = (uint32_t)std::min(n_ctx, 512);
    if (threads > 0) cp.n_threads = cp.n_threads_batch = threads;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) die("no context");
    const llama_vocab* vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const bool add_bos = llama_vocab_get_add_bos(vocab);

    std::vector<llama_token> toks(text.size() + 16);
    int n = llama_tokenize(vocab, text.data(), (int32_t)text.size(), toks.data(),
                           (int32_t)toks.size(), add_bos, false);
    if (n < 0) die("tokenization failed");
    toks.resize((size_t)n);
    int windows = n / n_ctx;
    if (n_chunks >= 0) windows = std::min(windows, n_chunks);
    if (windows < 1) die("text too short for one window");

    double nll = 0, nll2 = 0;
    long count = 0;
    const int first = n_ctx / 2;
    llama_batch batch = llama_batch_init(n_ctx, 0, 1);
    for (int w = 0; w < windows; ++w) {
        llama_memory_clear(llama_get_memory(ctx), true);
        batch.n_tokens = n_ctx;
        for (int p = 0; p < n_ctx; ++p) {
            llama_token t = toks[(size_t)w * n_ctx + p];
            if (p == 0 && add_bos) t = llama_vocab_bos(vocab);
            batch.token[p] = t;
            batch.pos[p] = p;
            batch.n_seq_id[p] = 1;
            batch.seq_id[p][0] = 0;
            batch.logits[p] = p >= first;
        }
        if (llama_decode(ctx, batch) != 0) die("llama_decode failed");
        for (int p = first; p + 1 < n_ctx; ++p) {
            const float* row = llama_get_logits_ith(ctx, p);
            double m = row[0];
            for (int k = 1; k < n_vocab; ++k) m = std::max(m, (double)row[k]);
            double s = 0;
            for (int k = 0; k < n_vocab; ++k) s += std::exp((double)row[k] - m);
            const double v = -((double)row[toks[(size_t)w * n_ctx + p + 1]] - m - std::log(s));
            nll += v;
            nll2 += v * v;
            ++count;
        }
        const double mean = nll / (double)count;
        std::fprintf(stderr, "[%d/%d] PPL %.4f\n", w + 1, windows, std::exp(mean));
    }
    const double mean = nll / (double)count;
    const double ppl = std::exp(mean);
    const double var = nll2 / (double)count - mean * mean;
    const double err = std::sqrt(std::max(var, 0.0) / (double)(count - 1)) * ppl;
    std::printf("PPL = %.4f +/- %.5f (%ld tokens scored in %d windows of %d)\n", ppl, err, count,
                windows, n_ctx);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
