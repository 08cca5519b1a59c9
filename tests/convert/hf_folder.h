// Test helper: writes small Hugging Face model folders (config.json, model.safetensors built
// byte by byte, tokenizer.json, tokenizer_config.json) so that the importer can be checked
// against values computed independently in the test, and reads back what it wrote.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "core/half.h"
#include "gguf/gguf.h"

namespace testhf {

struct StTensor {
    std::string dtype;  // "F32", "F16", "BF16"
    std::vector<int64_t> shape;
    std::vector<float> values;
};

// The folder of this test binary (build/tests): the deltallm binary and the scratch folder are
// found from it when CTest's environment does not carry DELTALLM_BIN / DELTALLM_TEST_TMP.
inline std::string test_binary_dir() {
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string(".") : exe.parent_path().string();
}

// A scratch folder private to this process (CTest runs the cases of a suite in parallel).
inline std::string tmp_root() {
    const char* d = std::getenv("DELTALLM_TEST_TMP");
    std::string root = d && *d ? d : test_binary_dir() + "/tmp";
    root += "/convert_" + std::to_string(::getpid());
    std::filesystem::create_directories(root);
    return root;
}

inline std::string deltallm_bin() {
    const char* b = std::getenv("DELTALLM_BIN");
    return b && *b ? b : test_binary_dir() + "/../deltallm";
}

inline void write_safetensors(const std::string& path, const std::map<std::string, StTensor>& ts) {
    nlohmann::json header = nlohmann::json::object();
    std::vector<uint8_t> data;
    for (const auto& [name, t] : ts) {
        size_t begin = data.size();
        for (float v : t.values) {
            if (t.dtype == "BOOL") {
                data.push_back(v != 0.f);
            } else if (t.dtype == "F32") {
                uint8_t b[4];
                std::memcpy(b, &v, 4);
                data.insert(data.end(), b, b + 4);
            } else {
                uint16_t h = t.dtype == "F16" ? dl::f32_to_f16(v) : dl::f32_to_bf16(v);
                data.push_back((uint8_t)(h & 0xFF));
                data.push_back((uint8_t)(h >> 8));
            }
        }
        header[name] = {
            {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
    }
    std::string h = header.dump();
    while (h.size() % 8) h += ' ';
    uint64_t n = h.size();
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(&n), 8);
    f.write(h.data(), (std::streamsize)h.size());
    f.write(reinterpret_cast<const char*>(data.data()), (std::streamsize)data.size());
}

// A byte-level BPE tokenizer: the 256 byte tokens (ids = byte values for printable ASCII is not
// needed here: ids follow insertion), two merges and two added tokens.
inline nlohmann::json tiny_tokenizer() {
    nlohmann::json vocab = nlohmann::json::object();
    int id = 0;
    for (int c = '!'; c <= '~'; ++c) vocab[std::string(1, (char)c)] = id++;
    vocab["\xC4\xA0"] = id++;  // U+0120, the byte-level space
    vocab["th"] = id++;
    vocab["\xC4\xA0th"] = id++;
    nlohmann::json tok = {
        {"version", "1.0"},
        {"added_tokens",
         {{{"id", id}, {"content", "<|im_end|>"}, {"special", true}},
          {{"id", id + 1}, {"content", "<think>"}, {"special", false}}}},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern",
              {{"Regex",
                "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"}}}},
            {{"type", "ByteLevel"}}}}}},
        {"model",
         {{"type", "BPE"},
          {"vocab", vocab},
          {"merges", {"t h", nlohmann::json::array({"\xC4\xA0", "th"})}}}}};
    return tok;
}

inline void write_folder(const std::string& dir, const nlohmann::json& config,
                         const std::map<std::string, StTensor>& ts,
                         const nlohmann::json& tok_config = nlohmann::json::object()) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/config.json") << config.dump(1);
    write_safetensors(dir + "/model.safetensors", ts);
    std::ofstream(dir + "/tokenizer.json") << tiny_tokenizer().dump(1);
    std::ofstream(dir + "/tokenizer_config.json") << tok_config.dump(1);
}

// Deterministic distinct values: element i of tensor k.
inline std::vector<float> ramp(size_t n, float base, float step = 0.001f) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = base + step * (float)i;
    return v;
}

// The values of an F32 tensor of a converted file (a test failure, and none, if it is missing or
// of another type).
inline std::vector<float> floats_of(const dl::gguf::File& f, const std::string& name) {
    const dl::gguf::TensorInfo* t = f.tensor(name);
    EXPECT_NE(t, nullptr) << name;
    if (!t) return {};
    EXPECT_EQ(t->type, dl::QType::F32) << name;
    std::vector<float> v((size_t)t->n_elements());
    std::memcpy(v.data(), t->data, v.size() * 4);
    return v;
}

}  // namespace testhf
