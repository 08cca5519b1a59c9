// libFuzzer target: config.json and tokenizer.json of a Hugging Face folder, as `convert` reads
// them, must plan a model or give a dl::Error (no crash, hang or unbounded allocation). The input
// is config.json, optionally followed by a NUL byte and tokenizer.json; the folder also holds a
// one-tensor model.safetensors made at start-up. Planning reads every key and the tokenizer but
// no tensor data, so nothing is written.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "convert/hf.h"
#include "core/error.h"
#include "core/json_text.h"
#include "model/model.h"
#include "quant/quant.h"

// model.cpp (linked for the architecture names) refers to the dot-product kernels when it checks a
// loaded model; no model is loaded here, and dot.cpp's CPU dispatch does not build with every
// clang, so the fuzz target has this stand-in instead of the kernels.
namespace dl::quant {
bool can_dot(QType) {
    return false;
}
}  // namespace dl::quant

namespace {

const char kTokenizer[] =
    R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},)"
    R"("added_tokens":[{"id":3,"content":"<|im_end|>","special":true}],)"
    R"("pre_tokenizer":{"type":"ByteLevel"}})";

std::string make_folder() {
    char tmpl[] = "/tmp/convert_config_fuzz.XXXXXX";
    const char* dir = ::mkdtemp(tmpl);
    if (!dir) std::abort();
    // A safetensors file by hand: 8-byte header length, the JSON header, then 16 bytes of data.
    std::string header =
        R"({"model.embed_tokens.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
    while (header.size() % 8) header += ' ';
    const uint64_t n = header.size();
    std::ofstream f(std::string(dir) + "/model.safetensors", std::ios::binary);
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << header;
    f.write("\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16);
    return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string dir = make_folder();
    const std::string input(reinterpret_cast<const char*>(data), size);
    const size_t nul = input.find('\0');
    const std::string config = input.substr(0, nul);
    const std::string tokenizer = nul == std::string::npos ? kTokenizer : input.substr(nul + 1);
    std::ofstream(dir + "/config.json", std::ios::trunc | std::ios::binary) << config;
    std::ofstream(dir + "/tokenizer.json", std::ios::trunc | std::ios::binary) << tokenizer;
    try {
        (void)dl::parse_json(tokenizer, "tokenizer.json");
    } catch (const dl::Error&) {
    }
    try {
        auto m = dl::convert::HfModel::open(dir);
        dl::convert::Plan plan;
        plan.arch = dl::arch_name(m->arch);
        plan.n_layer = m->get_size("num_hidden_layers");
        if (m->arch == dl::Arch::qwen35)
            dl::convert::plan_qwen35(m, plan);
        else
            dl::convert::plan_llama_like(m, plan);
        dl::convert::plan_tokenizer(*m, m->get_size("vocab_size"), plan);
    } catch (const dl::Error&) {
    }
    return 0;
}
