// Writes the small seed corpora under fuzz/corpus/ (run by hand after a format change:
// build-fuzz/fuzz/make_seeds fuzz/corpus). The GGUF seeds come from the library's writer.
#include <cstdio>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace {

using namespace dl::gguf;
using dl::QType;

void save(const std::string& path, const std::vector<uint8_t>& b) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(b.data(), 1, b.size(), f) != b.size()) std::perror(path.c_str());
    if (f) std::fclose(f);
}

std::vector<uint8_t> bytes(size_t n, uint8_t seed) {
    std::vector<uint8_t> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = (uint8_t)(seed + i * 37);
    return b;
}

}  // namespace

int main(int argc, char** argv) {
    std::string dir = argc > 1 ? argv[1] : "fuzz/corpus";

    Writer model;  // scalar keys of most types and three tensor types
    model.set("general.architecture", Value::str("qwen35"));
    model.set("qwen35.block_count", Value::u32(2));
    model.set("qwen35.rope.freq_base", Value::f32(1e6f));
    model.set("qwen35.flag", Value::boolean(true));
    model.set("qwen35.big", Value::u64(1ull << 40));
    model.set("qwen35.neg", Value{ValueType::INT64, int64_t{-3}});
    model.set("qwen35.f64", Value{ValueType::FLOAT64, 0.5});
    model.add_tensor("token_embd.weight", QType::F16, {4, 2}, bytes(16, 1));
    model.add_tensor("blk.0.ffn_up.weight", QType::Q4_K, {256}, bytes(144, 2));
    model.add_tensor("output_norm.weight", QType::F32, {4}, bytes(16, 3));
    auto m = model.to_bytes();
    save(dir + "/gguf/model", m);
    m[4] = 2;  // the same as version 2
    save(dir + "/gguf/model_v2", m);

    Writer tok;  // tokenizer-style arrays and a nested one
    tok.set("tokenizer.ggml.tokens", Value::array_of_strings({"<s>", "a", "b", "ab", " the"}));
    tok.set("tokenizer.ggml.scores", Value::array_of_f32({0, -1, -2, -3, -4}));
    tok.set("tokenizer.ggml.token_type", Value::array_of_i32({3, 1, 1, 1, 1}));
    auto inner = std::make_shared<Array>();
    inner->elem_type = ValueType::UINT16;
    inner->ints = {1, 2};
    auto outer = std::make_shared<Array>();
    outer->elem_type = ValueType::ARRAY;
    outer->items = {Value{ValueType::ARRAY, inner}};
    tok.set("x.nested", Value{ValueType::ARRAY, outer});
    tok.set_alignment(64);
    tok.add_tensor("w", QType::Q8_0, {32, 2}, bytes(68, 4));
    save(dir + "/gguf/tokenizer", tok.to_bytes());

    save(dir + "/gguf/empty", Writer().to_bytes());

    auto st = [](const std::string& json, size_t data) {
        std::vector<uint8_t> b(8);
        uint64_t n = json.size();
        for (int i = 0; i < 8; ++i) b[i] = (uint8_t)(n >> (8 * i));
        b.insert(b.end(), json.begin(), json.end());
        auto d = bytes(data, 9);
        b.insert(b.end(), d.begin(), d.end());
        return b;
    };
    save(dir + "/safetensors/three.safetensors",
         st(R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,2],)"
            R"("data_offsets":[0,16]},"h":{"dtype":"F16","shape":[3],"data_offsets":[16,22]},)"
            R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[22,26]}})",
            26));
    save(dir + "/safetensors/f8.safetensors",
         st(R"({"a":{"dtype":"F8_E4M3","shape":[3],"data_offsets":[0,3]},)"
            R"("c":{"dtype":"I64","shape":[1,1],"data_offsets":[3,11]}})",
            11));
    return 0;
}
