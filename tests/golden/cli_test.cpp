// Golden parity through the command line, the way a user checks a model: `deltallm convert` the
// reference folder, then `deltallm run --prompt-ids ... --temp 0 --print-ids --dump-logits` and
// compare the printed continuation and the dumped prompt logits with the PyTorch reference.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "npy_read.h"
#include "paths.h"

namespace {

namespace fs = std::filesystem;

std::string sh(const std::string& cmd, int& rc) {
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return "";
    std::string out;
    char buf[4096];
    while (fgets(buf, sizeof buf, p)) out += buf;
    rc = WEXITSTATUS(pclose(p));
    return out;
}

// A 2-D float32 .npy file (tests/npy_read.h), as rows x cols.
std::vector<float> read_npy_rows(const std::string& path, int64_t& rows, int64_t& cols) {
    dl::test::NpyArray a = dl::test::read_npy_file(path);
    if (!a.ok() || a.shape.size() != 2 || a.f32.empty()) {
        rows = cols = 0;
        return {};
    }
    rows = a.shape[0];
    cols = a.shape[1];
    return std::move(a.f32);
}

class GoldenCli : public ::testing::TestWithParam<std::string> {};

// The 64-token sequence: its reference greedy margins are at least 0.048 (recorded in
// golden.json), far above the f16 KV cache's rounding, so the printed continuation must match.
// The prompt logits go through the f16 KV cache the command uses; measured 8.3e-4 (qwen3),
// 9.8e-4 (llama), 2.1e-2 for the perturbation-amplifying tiny hybrid (see golden_test.cpp) and
// 0.163 for its mixture, whose router takes other experts where scores lie a hair apart (the
// same as its F16 file on the CPU chain, golden_test.cpp); bounded at about 3x that (the
// f32-cache library-level test holds 1e-4).
TEST_P(GoldenCli, ConvertThenRunMatchesReference) {
    const std::string bin = golden::deltallm_bin(), data = golden::data_dir(),
                      tmp = golden::tmp_dir();
    ASSERT_TRUE(fs::exists(bin)) << bin << " does not exist (set DELTALLM_BIN)";
    const std::string family = GetParam();
    const fs::path dir = fs::path(data) / "golden" / family;
    nlohmann::json g = nlohmann::json::parse(std::ifstream(dir / "golden.json"));
    const nlohmann::json* seq = nullptr;
    for (const auto& s : g["sequences"])
        if (s["len"] == 64) seq = &s;
    ASSERT_NE(seq, nullptr);

    const std::string gguf = (fs::path(tmp) / ("cli_" + family + ".gguf")).string();
    const std::string dump = (fs::path(tmp) / ("cli_" + family + ".npy")).string();
    int rc = 0;
    std::string out = sh(bin + " convert " + dir.string() + " -o " + gguf + " 2>&1", rc);
    ASSERT_EQ(rc, 0) << out;

    std::string ids;
    // Appended piece by piece: `"," + std::to_string(t)` trips a GCC 12 -Wrestrict false positive.
    for (int32_t t : (*seq)["ids"]) {
        if (!ids.empty()) ids += ',';
        ids += std::to_string(t);
    }
    out = sh(bin + " run -m " + gguf + " --device cpu --prompt-ids " + ids +
                 " -n 32 --temp 0 --ignore-eos --print-ids --dump-logits " + dump + " 2>/dev/null",
             rc);
    ASSERT_EQ(rc, 0) << out;
    std::string want;
    for (int32_t t : (*seq)["greedy"]) {
        if (!want.empty()) want += ',';
        want += std::to_string(t);
    }
    EXPECT_EQ(out.substr(0, out.find('\n')), want);

    int64_t rows = 0, cols = 0;
    std::vector<float> got = read_npy_rows(dump, rows, cols);
    int64_t rr = 0, rc2 = 0;
    std::vector<float> ref =
        read_npy_rows((dir / (*seq)["logits"].get<std::string>()).string(), rr, rc2);
    ASSERT_EQ(cols, rc2);
    ASSERT_GE(rows, rr);
    double worst = 0;
    for (int64_t r = 0; r < rr; ++r) {
        double d2 = 0, b2 = 0;
        for (int64_t i = 0; i < cols; ++i) {
            double a = got[r * cols + i], b = ref[r * cols + i];
            d2 += (a - b) * (a - b);
            b2 += b * b;
        }
        worst = std::max(worst, std::sqrt(d2 / b2));
    }
    std::printf("%s: deltallm run prompt logits max relative error %.3g\n", family.c_str(), worst);
    EXPECT_LT(worst, family == "qwen35" ? 6e-2 : family == "qwen35moe" ? 0.5 : 3e-3);
    fs::remove(gguf);
    fs::remove(dump);
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenCli,
                         ::testing::Values("qwen35", "qwen3", "llama", "qwen35moe", "qwen3moe"));

}  // namespace
