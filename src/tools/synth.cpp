// `deltallm synth --arch qwen35 --shape 9b --type q4_k_m -o OUT.gguf`: a model with random
// weights in real shapes and types, for benchmarks and tests without downloads.
#include <chrono>
#include <cstdio>

#include "convert/convert.h"
#include "core/output_file.h"
#include "tools/tool.h"

namespace dl::tools {

namespace {

struct SynthArgs {
    convert::SynthOptions options;
    std::string out;
};

Registrar reg(
    "synth",
    "write a model with random weights in real shapes (qwen35, qwen35moe, qwen3, qwen3moe, llama)",
    [](CLI::App& app) -> Run {
        auto a = std::make_shared<SynthArgs>();
        app.add_option("--arch", a->options.arch, "qwen35, qwen35moe, qwen3, qwen3moe or llama")
            ->capture_default_str();
        app.add_option("--shape", a->options.shape,
                       "qwen35: tiny 0.8b 2b 4b 9b 27b; qwen35moe: tiny 35b-a3b 122b-a10b; "
                       "qwen3: tiny 0.6b 8b; qwen3moe: tiny 30b-a3b; llama: tiny 1b 8b")
            ->capture_default_str();
        app.add_option("--type", a->options.type, "f32, f16, q8_0, q4_k_m, q6_k, ...")
            ->capture_default_str();
        app.add_option("--seed", a->options.seed, "random seed")->capture_default_str();
        app.add_option("-o,--output", a->out, "GGUF file to write")->required();
        return [a] {
            check_output_path(a->out);  // before the work, not after it
            auto t0 = std::chrono::steady_clock::now();
            convert::synth(a->options, a->out);
            double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::fprintf(stderr, "wrote %s in %.1f s\n", a->out.c_str(), s);
            return 0;
        };
    });

}  // namespace

}  // namespace dl::tools
