// `deltallm perplexity` against a computation of its own: the golden tiny Qwen3 converted, its
// text tokenized by `deltallm tokenize`, each window's logits dumped by `deltallm run
// --dump-logits` and the log-softmax of the scored half taken here; plus the windowing rules
// (how many windows, how many positions each scores, -b and --chunks) and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "npy_read.h"

namespace {

namespace fs = std::filesystem;
using Result = dl::test::CliResult;

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v && *v ? v : fallback;
}

std::string scratch() {
    std::string d = env_or("DELTALLM_TEST_TMP", "/tmp") + "/ppl_" + std::to_string(::getpid());
    fs::create_directories(d);
    return d;
}

Result deltallm(const std::string& args, const std::string& stdin_text = "") {
    const std::string bin = env_or("DELTALLM_BIN", "deltallm");
    const std::string base = scratch() + "/cli";
    std::ofstream(base + ".in", std::ios::binary) << stdin_text;
    return dl::test::run_captured(bin, args, base + ".in", base);
}

// A text of plain English sentences, long enough for several windows of the tiny tokenizer.
const char* kText =
    "The ship left the harbour at dawn, and the wind was fair. The sailors sang as they worked, "
    "and the captain watched the grey sea from the deck. By noon the land had gone from sight. "
    "In the evening a storm rose in the west, and the waves grew tall and dark. All night the "
    "men held the ropes, and in the morning the sky was clear again.\n";

std::vector<int> parse_ids(const std::string& s) {
    std::vector<int> ids;
    std::istringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');) ids.push_back(std::stoi(item));
    return ids;
}

// `tokenize --show-pieces` writes a piece between quotes with \n \t \r \' \\ \xHH escaped.
std::string unescape_piece(const std::string& line) {
    size_t a = line.find('\''), b = line.rfind('\'');
    std::string s = line.substr(a + 1, b - a - 1), out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\\') {
            out += s[i];
            continue;
        }
        char c = s[++i];
        if (c == 'n')
            out += '\n';
        else if (c == 't')
            out += '\t';
        else if (c == 'r')
            out += '\r';
        else if (c == 'x')
            out += (char)std::stoi(s.substr(i + 1, 2), nullptr, 16), i += 2;
        else
            out += c;
    }
    return out;
}

struct Reported {
    double ppl = 0, err = 0, bpb = 0;
    long tokens = 0, bytes = 0, windows = 0;
};

Reported parse_report(const std::string& out) {
    Reported r;
    EXPECT_EQ(std::sscanf(out.c_str(), "PPL = %lf +/- %lf", &r.ppl, &r.err), 2) << out;
    size_t p = out.find("bits per byte = ");
    EXPECT_NE(p, std::string::npos) << out;
    if (p != std::string::npos) {
        int c = 0;
        EXPECT_EQ(
            std::sscanf(out.c_str() + p,
                        "bits per byte = %lf (%ld tokens, %ld bytes scored in %ld windows of %d)",
                        &r.bpb, &r.tokens, &r.bytes, &r.windows, &c),
            5)
            << out;
    }
    return r;
}

class Perplexity : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        dir_ = scratch();
        model_ = dir_ + "/qwen3.gguf";
        text_ = dir_ + "/text.txt";
        std::ofstream(text_, std::ios::binary) << kText;
        const std::string src = env_or("DELTALLM_TEST_DATA", "tests/data") + "/golden/qwen3";
        Result r = deltallm("convert " + src + " -o " + model_ + " --type f32");
        ASSERT_EQ(r.rc, 0) << r.err;
    }
    static void TearDownTestSuite() {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    static std::string dir_, model_, text_;
};
std::string Perplexity::dir_, Perplexity::model_, Perplexity::text_;

// The number itself: every window's second half scored from logits dumped by `run`, the NLL's
// mean, its standard error and the bytes of the scored tokens computed here.
TEST_F(Perplexity, MatchesLogSoftmaxOfDumpedLogits) {
    const int c = 16;
    Result tk = deltallm("tokenize -m " + model_, kText);
    ASSERT_EQ(tk.rc, 0) << tk.err;
    const std::vector<int> ids = parse_ids(tk.out);
    Result pieces = deltallm("tokenize --show-pieces -m " + model_, kText);
    ASSERT_EQ(pieces.rc, 0) << pieces.err;
    std::vector<std::string> piece;
    std::istringstream ps(pieces.out);
    for (std::string l; std::getline(ps, l);) piece.push_back(unescape_piece(l));
    ASSERT_EQ(piece.size(), ids.size());

    const int n_windows = (int)ids.size() / c;
    ASSERT_GE(n_windows, 3) << "the text is too short for this test";
    double nll = 0, nll2 = 0, bytes = 0;
    long count = 0;
    for (int k = 0; k < n_windows; ++k) {
        std::string window;
        for (int i = 0; i < c; ++i) {
            if (i) window += ',';
            window += std::to_string(ids[k * c + i]);
        }
        const std::string npy = dir_ + "/w.npy";
        Result r = deltallm("run -m " + model_ + " --device cpu --prompt-ids " + window +
                            " -n 0 --dump-logits " + npy);
        ASSERT_EQ(r.rc, 0) << r.err;
        const dl::test::NpyArray a = dl::test::read_npy_file(npy);
        ASSERT_TRUE(a.ok() && a.shape.size() == 2) << a.error;
        const int64_t rows = a.shape[0], cols = a.shape[1];
        const std::vector<float>& lg = a.f32;
        ASSERT_GE(rows, c);
        for (int i = c / 2; i < c - 1; ++i) {
            const float* row = lg.data() + (size_t)i * cols;
            double mx = row[0], sum = 0;
            for (int64_t j = 1; j < cols; ++j) mx = std::max(mx, (double)row[j]);
            for (int64_t j = 0; j < cols; ++j) sum += std::exp(row[j] - mx);
            const int target = ids[k * c + i + 1];
            const double v = std::log(sum) + mx - row[target];
            nll += v;
            nll2 += v * v;
            bytes += piece[k * c + i + 1].size();
            ++count;
        }
    }
    const double mean = nll / count, ppl = std::exp(mean);
    const double err = std::sqrt((nll2 / count - mean * mean) / (count - 1)) * ppl;
    const double bpb = nll / std::log(2.0) / bytes;

    Result r = deltallm("perplexity -m " + model_ + " --device cpu -c 16 -f " + text_);
    ASSERT_EQ(r.rc, 0) << r.err;
    Reported got = parse_report(r.out);
    EXPECT_EQ(got.windows, n_windows);
    EXPECT_EQ(got.tokens, count);
    EXPECT_EQ(got.bytes, (long)bytes);
    EXPECT_NEAR(got.ppl, ppl, 1e-4 * ppl);
    EXPECT_NEAR(got.err, err, 1e-3 * err + 1e-5);
    EXPECT_NEAR(got.bpb, bpb, 1e-3);
    // A random tiny model predicts little: near the vocabulary's size, far from 1.
    EXPECT_GT(got.ppl, 10.0);
}

// The windows: floor(tokens / c) of them (or --chunks), c - 1 - c/2 predictions scored in each,
// a progress line per window on stderr, and prefill in pieces of -b giving the same number.
TEST_F(Perplexity, WindowsChunksAndBatches) {
    Result tk = deltallm("tokenize -m " + model_, kText);
    ASSERT_EQ(tk.rc, 0) << tk.err;
    const long n_tokens = (long)parse_ids(tk.out).size();

    Result whole = deltallm("perplexity -m " + model_ + " --device cpu -c 20 -f " + text_);
    ASSERT_EQ(whole.rc, 0) << whole.err;
    Reported w = parse_report(whole.out);
    EXPECT_EQ(w.windows, n_tokens / 20);
    EXPECT_EQ(w.tokens, w.windows * (20 - 1 - 10));
    int progress = 0;
    std::istringstream es(whole.err);
    for (std::string l; std::getline(es, l);) progress += l.rfind("[", 0) == 0 ? 1 : 0;
    EXPECT_EQ(progress, w.windows);

    Result two = deltallm("perplexity -m " + model_ + " --device cpu -c 20 --chunks 2 -f " + text_);
    ASSERT_EQ(two.rc, 0) << two.err;
    Reported t = parse_report(two.out);
    EXPECT_EQ(t.windows, 2);
    EXPECT_EQ(t.tokens, 2 * 9);

    Result batched = deltallm("perplexity -m " + model_ + " --device cpu -c 20 -b 7 -f " + text_);
    ASSERT_EQ(batched.rc, 0) << batched.err;
    Reported b = parse_report(batched.out);
    EXPECT_EQ(b.tokens, w.tokens);
    EXPECT_NEAR(b.ppl, w.ppl, 1e-4 * w.ppl);
}

void expect_one_error_line(const Result& r, const char* what) {
    EXPECT_EQ(r.rc, 1) << what << "\n" << r.err;
    int n_error = 0;
    std::istringstream es(r.err);
    for (std::string l; std::getline(es, l);) n_error += l.rfind("error: ", 0) == 0 ? 1 : 0;
    EXPECT_EQ(n_error, 1) << what << "\n" << r.err;
}

TEST_F(Perplexity, BadInputGivesOneErrorLine) {
    const std::string m = "perplexity -m " + model_ + " --device cpu ";
    expect_one_error_line(deltallm(m + "-c 3 -f " + text_), "c too small");
    expect_one_error_line(deltallm(m + "-c 4096 -f " + text_), "c too large for the text");
    expect_one_error_line(deltallm(m + "-f /nonexistent/text.txt"), "missing file");
    expect_one_error_line(deltallm(m), "no file");
    expect_one_error_line(deltallm(m + "-c 16 -b -1 -f " + text_), "negative batch");
    expect_one_error_line(deltallm(m + "-c 16 --chunks 0 -f " + text_), "no chunks");
}

}  // namespace
