// `deltallm bench` on a tiny synthetic model: the JSON parses and holds one row per asked test in
// order, with as many samples as repetitions, positive rates, a mean and standard deviation that
// agree with the samples (recomputed here), ceilings that follow from the given floors; the
// markdown and CSV forms have their rows; a depth (-d) repeats the tests in rows named "tg4 @ d8"
// with n_depth, and -d 0 prints no depth at all; bad flags give one error line and exit code 1.
// No timing assertions: the machine may be loaded.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"

namespace {

using Result = dl::test::CliResult;

std::string tmp_dir() {
    const char* d = std::getenv("DELTALLM_TEST_TMP");
    return d ? d : "/tmp";
}

// DELTALLM_BIN from CTest, else the deltallm binary of the build this test belongs to
// (build/tests/test_bench -> build/deltallm): some CMake versions drop all but the first
// variable of a discovered test's environment.
std::string deltallm_bin() {
    if (const char* b = std::getenv("DELTALLM_BIN")) return b;
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return "";
    auto bin = self.parent_path().parent_path() / "deltallm";
    return std::filesystem::exists(bin) ? bin.string() : "";
}

Result deltallm(const std::string& args) {
    const std::string bin = deltallm_bin();
    EXPECT_FALSE(bin.empty()) << "no deltallm binary: set DELTALLM_BIN (ctest does)";
    if (bin.empty()) return {};
    return dl::test::run_captured(bin, args, "/dev/null",
                                  tmp_dir() + "/bench_" + std::to_string(::getpid()));
}

std::vector<std::string> lines(const std::string& s) {
    std::vector<std::string> v;
    std::istringstream ss(s);
    for (std::string l; std::getline(ss, l);)
        if (!l.empty()) v.push_back(l);
    return v;
}

class BenchCli : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        model_ = tmp_dir() + "/bench_tiny_" + std::to_string(::getpid()) + ".gguf";
        Result r = deltallm("synth --arch qwen35 --shape tiny --type q4_k_m -o " + model_);
        if (r.rc != 0) setup_error_ = "synth failed: " + r.err;
    }
    // A failed synth fails every test (an assertion in SetUpTestSuite would only skip them).
    void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }
    static void TearDownTestSuite() { std::remove(model_.c_str()); }
    static std::string model_, setup_error_;
};
std::string BenchCli::model_, BenchCli::setup_error_;

TEST_F(BenchCli, JsonRowsSamplesAndFloors) {
    const double bw = 12.5, peak = 100.0;
    Result r = deltallm("-t 1 bench -m " + model_ +
                        " -p 16,8 -n 4 -r 3 -o json --bw-gbps 12.5 --peak-gflops 100");
    ASSERT_EQ(r.rc, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);  // throws (fails the test) if not JSON
    EXPECT_EQ(j["engine"], "deltallm");
    EXPECT_EQ(j["device"], "cpu");
    EXPECT_EQ(j["threads"], 1);
    EXPECT_EQ(j["bandwidth_source"], "given");
    EXPECT_DOUBLE_EQ(j["bandwidth_gbps"].get<double>(), bw);
    struct stat st {};
    ASSERT_EQ(::stat(model_.c_str(), &st), 0);
    const double size = j["size_bytes"].get<double>(),
                 tg_bytes = j["tg_bytes_per_token"].get<double>();
    EXPECT_GT(size, 0);
    EXPECT_LT(size, (double)st.st_size);  // tensor data without the header and metadata
    EXPECT_GT(tg_bytes, 0);
    EXPECT_LE(tg_bytes, size);
    EXPECT_GT(j["n_params"].get<double>(), j["matmul_params"].get<double>());
    EXPECT_GT(j["matmul_params"].get<double>(), 0);

    const auto& rows = j["rows"];
    ASSERT_EQ(rows.size(), 3u);
    const char* names[] = {"pp16", "pp8", "tg4"};
    for (size_t i = 0; i < 3; ++i) {
        const auto& row = rows[i];
        EXPECT_EQ(row["test"], names[i]);
        std::vector<double> s = row["samples_ts"].get<std::vector<double>>();
        ASSERT_EQ(s.size(), 3u);
        double mean = 0;
        for (double x : s) {
            EXPECT_TRUE(std::isfinite(x));
            EXPECT_GT(x, 0);
            mean += x / 3;
        }
        double ss = 0;
        for (double x : s) ss += (x - mean) * (x - mean);
        EXPECT_NEAR(row["avg_ts"].get<double>(), mean, 1e-9 * mean);
        EXPECT_NEAR(row["stddev_ts"].get<double>(), std::sqrt(ss / 2), 1e-6 * mean + 1e-12);
        const double ceiling = row["ceiling_ts"].get<double>();
        if (i < 2) {
            EXPECT_EQ(row["floor_kind"], "flops");
            // The output head once a prompt (its last row's logits), the rest every row.
            const double head = j["head_params"].get<double>(), n = i == 0 ? 16 : 8;
            EXPECT_GT(head, 0);
            EXPECT_NEAR(ceiling * 2 * (j["matmul_params"].get<double>() - head + head / n),
                        peak * 1e9, 1e-6 * peak * 1e9);
        } else {
            EXPECT_EQ(row["floor_kind"], "bandwidth");
            EXPECT_EQ(row["n_gen"], 4);
            EXPECT_NEAR(ceiling * tg_bytes, bw * 1e9, 1e-6 * bw * 1e9);
        }
    }
}

TEST_F(BenchCli, MeasuresCpuFloorsWhenNotGiven) {
    Result r = deltallm("-t 1 bench -m " + model_ + " -p 8 -n 0 -r 1 -o json");
    ASSERT_EQ(r.rc, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["rows"].size(), 1u);
    if (__builtin_cpu_supports("avx2")) {
        EXPECT_GT(j["bandwidth_gbps"].get<double>(), 0.1);
        EXPECT_GT(j["rows"][0]["ceiling_ts"].get<double>(), 0);
    }
}

TEST_F(BenchCli, MarkdownAndCsvRows) {
    Result md = deltallm("bench -m " + model_ + " -p 8 -n 2 -r 2 --bw-gbps 10 --peak-gflops 10");
    ASSERT_EQ(md.rc, 0) << md.err;
    std::vector<std::string> l = lines(md.out);
    ASSERT_GE(l.size(), 4u);
    EXPECT_EQ(l[0].rfind("| model | size | params | device |", 0), 0u) << l[0];
    EXPECT_NE(l[2].find("| pp8 |"), std::string::npos) << l[2];
    EXPECT_NE(l[3].find("| tg2 |"), std::string::npos) << l[3];
    EXPECT_NE(l[2].find("±"), std::string::npos);

    Result csv =
        deltallm("bench -m " + model_ + " -p 8 -n 2 -r 1 -o csv --bw-gbps 10 --peak-gflops 10");
    ASSERT_EQ(csv.rc, 0) << csv.err;
    l = lines(csv.out);
    ASSERT_EQ(l.size(), 3u);
    for (const std::string& line : l)
        EXPECT_EQ(std::count(line.begin(), line.end(), ','), 11) << line;
    EXPECT_NE(l[1].find(",pp8,"), std::string::npos);
    EXPECT_NE(l[2].find(",tg2,"), std::string::npos);
}

// Every test at every depth, depth outermost (llama-bench's order), each row with its n_depth and
// positive rates; the markdown and CSV forms name the rows the same way and the CSV gains the
// n_depth column.
TEST_F(BenchCli, DepthRepeatsEveryTestAtEachDepth) {
    Result r = deltallm("-t 1 bench -m " + model_ + " -p 4 -n 4 -d 0,8 -r 2 -o json");
    ASSERT_EQ(r.rc, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);
    const auto& rows = j["rows"];
    ASSERT_EQ(rows.size(), 4u) << r.out;
    const char* names[] = {"pp4", "tg4", "pp4 @ d8", "tg4 @ d8"};
    const int depths[] = {0, 0, 8, 8};
    for (size_t i = 0; i < 4; ++i) {
        const auto& row = rows[i];
        EXPECT_EQ(row["test"], names[i]);
        ASSERT_TRUE(row.contains("n_depth")) << row.dump();
        EXPECT_EQ(row["n_depth"], depths[i]);
        EXPECT_EQ(row["n_prompt"], i % 2 == 0 ? 4 : 0);
        EXPECT_EQ(row["n_gen"], i % 2 == 1 ? 4 : 0);
        std::vector<double> s = row["samples_ts"].get<std::vector<double>>();
        ASSERT_EQ(s.size(), 2u);
        for (double x : s) {
            EXPECT_TRUE(std::isfinite(x));
            EXPECT_GT(x, 0);
        }
        EXPECT_GT(row["avg_ts"].get<double>(), 0);
    }

    Result md = deltallm("-t 1 bench -m " + model_ + " -p 0 -n 4 -d 8 -r 1");
    ASSERT_EQ(md.rc, 0) << md.err;
    std::vector<std::string> l = lines(md.out);
    ASSERT_GE(l.size(), 3u);
    EXPECT_NE(l[2].find("| tg4 @ d8 |"), std::string::npos) << l[2];

    Result csv = deltallm("-t 1 bench -m " + model_ + " -p 0 -n 4 -d 8 -r 1 -o csv");
    ASSERT_EQ(csv.rc, 0) << csv.err;
    l = lines(csv.out);
    ASSERT_EQ(l.size(), 2u) << csv.out;
    EXPECT_EQ(l[0],
              "engine,model,size_gib,params_b,device,threads,test,n_prompt,n_gen,n_depth,avg_ts,"
              "stddev_ts,ceiling_ts");
    EXPECT_EQ(std::count(l[1].begin(), l[1].end(), ','), 12) << l[1];
    EXPECT_NE(l[1].find(",tg4 @ d8,0,4,8,"), std::string::npos) << l[1];
}

// Depth 0 alone, given or not, prints what bench printed before depths existed: no suffix, no
// n_depth key, the old CSV header.
TEST_F(BenchCli, DepthZeroLeavesTheOutputAsItWas) {
    for (const std::string depth : {"", " -d 0"}) {
        Result j = deltallm("-t 1 bench -m " + model_ + " -p 4 -n 4 -r 1 -o json" + depth);
        ASSERT_EQ(j.rc, 0) << j.err;
        nlohmann::json doc = nlohmann::json::parse(j.out);
        ASSERT_EQ(doc["rows"].size(), 2u);
        EXPECT_EQ(doc["rows"][0]["test"], "pp4");
        EXPECT_EQ(doc["rows"][1]["test"], "tg4");
        for (const auto& row : doc["rows"]) EXPECT_FALSE(row.contains("n_depth")) << row.dump();
        EXPECT_EQ(j.out.find('@'), std::string::npos) << j.out;

        Result md = deltallm("-t 1 bench -m " + model_ + " -p 4 -n 4 -r 1" + depth);
        ASSERT_EQ(md.rc, 0) << md.err;
        EXPECT_EQ(md.out.find('@'), std::string::npos) << md.out;
        EXPECT_EQ(md.out.find("depth"), std::string::npos) << md.out;

        Result csv = deltallm("-t 1 bench -m " + model_ + " -p 4 -n 4 -r 1 -o csv" + depth);
        ASSERT_EQ(csv.rc, 0) << csv.err;
        std::vector<std::string> l = lines(csv.out);
        ASSERT_EQ(l.size(), 3u);
        EXPECT_EQ(l[0],
                  "engine,model,size_gib,params_b,device,threads,test,n_prompt,n_gen,avg_ts,"
                  "stddev_ts,ceiling_ts");
        EXPECT_NE(l[1].find(",pp4,4,0,"), std::string::npos) << l[1];
        EXPECT_NE(l[2].find(",tg4,0,4,"), std::string::npos) << l[2];
    }
}

TEST_F(BenchCli, NegativeDepthIsAnError) {
    for (const std::string d : {"-8", "0,-8"}) {
        Result r = deltallm("bench -m " + model_ + " -n 4 -d " + d);
        EXPECT_EQ(r.rc, 1) << d << "\n" << r.err;
        ASSERT_EQ(lines(r.err).size(), 1u) << d << "\n" << r.err;
        EXPECT_EQ(r.err.rfind("error:", 0), 0u) << r.err;
        EXPECT_NE(r.err.find("-d: depths must be 0 or more, not -8"), std::string::npos) << r.err;
        EXPECT_TRUE(r.out.empty()) << r.out;
    }
}

TEST_F(BenchCli, BadFlagsAreOneErrorLine) {
    const std::vector<std::string> cases = {"bench -m " + model_ + " -r 0",
                                            "bench -m " + model_ + " -o xml",
                                            "bench -m " + model_ + " -p 0 -n 0",
                                            "bench -m " + model_ + " -p x",
                                            "bench -m " + model_ + " -d x",
                                            "bench -m /nonexistent.gguf",
                                            "bench"};
    for (const std::string& args : cases) {
        Result r = deltallm(args);
        EXPECT_EQ(r.rc, 1) << args << "\n" << r.err;
        EXPECT_EQ(lines(r.err).size(), 1u) << args << "\n" << r.err;
        EXPECT_EQ(r.err.rfind("error:", 0), 0u) << args << "\n" << r.err;
    }
}

}  // namespace
