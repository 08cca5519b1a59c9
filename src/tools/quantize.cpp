// `deltallm quantize IN.gguf OUT.gguf TYPE`: re-encode a GGUF file's tensors to a type or mix.
#include <chrono>
#include <cstdio>

#include "convert/convert.h"
#include "core/output_file.h"
#include "tools/tool.h"

namespace dl::tools {

namespace {

struct QuantizeArgs {
    std::string in, out, type;
};

Registrar reg(
    "quantize", "re-quantize a GGUF file to another type or mix (q4_k_m, q8_0, ...)",
    [](CLI::App& app) -> Run {
        auto a = std::make_shared<QuantizeArgs>();
        app.add_option("IN", a->in, "GGUF file to read")->required();
        app.add_option("OUT", a->out, "GGUF file to write")->required();
        app.add_option("TYPE", a->type, "q4_k_m, q5_k_m, q6_k, q8_0, f16, ...")->required();
        return [a] {
            check_output_path(a->out);  // before the work, not after it
            auto t0 = std::chrono::steady_clock::now();
            convert::quantize_gguf(a->in, a->out, a->type);
            double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::fprintf(stderr, "wrote %s (%s) in %.1f s\n", a->out.c_str(), a->type.c_str(), s);
            return 0;
        };
    });

}  // namespace

}  // namespace dl::tools
