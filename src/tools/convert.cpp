// `deltallm convert HF_DIR -o OUT.gguf [--type f16]`: a Hugging Face checkpoint folder to a GGUF
// file (Qwen3.5, Qwen3, Llama).
#include <chrono>
#include <cstdio>

#include "convert/convert.h"
#include "core/output_file.h"
#include "tools/tool.h"

namespace dl::tools {

namespace {

struct ConvertArgs {
    std::string dir, out;
    convert::ConvertOptions options;
};

Registrar reg(
    "convert", "convert a Hugging Face model folder (safetensors) to GGUF",
    [](CLI::App& app) -> Run {
        auto a = std::make_shared<ConvertArgs>();
        app.add_option("HF_DIR", a->dir, "folder with config.json, *.safetensors, tokenizer.json")
            ->required();
        app.add_option("-o,--output", a->out, "GGUF file to write")->required();
        app.add_option("--type", a->options.type,
                       "f32, f16, bf16, q8_0, q4_0 or a mix: q4_k_m, q5_k_m, q6_k, ...")
            ->capture_default_str();
        app.add_option("--name", a->options.name, "general.name (default: the folder's name)");
        return [a] {
            check_output_path(a->out);  // before the work, not after it
            auto t0 = std::chrono::steady_clock::now();
            convert::convert_hf(a->dir, a->out, a->options);
            double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::fprintf(stderr, "wrote %s (%s) in %.1f s\n", a->out.c_str(),
                         a->options.type.c_str(), s);
            return 0;
        };
    });

}  // namespace

}  // namespace dl::tools
