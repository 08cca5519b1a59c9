// The deltallm binary as a user and a script drive it: text and speeds from the built-in model,
// deterministic ids, logits dumps that numpy can read and that agree with the printed ids, seeds,
// scripted chat, tokenize, info, and bad input (one "error:" line, exit code 1, no crash).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_runner.h"
#include "deltallm_cli.h"
#include "engine/tiny_image.h"
#include "npy_read.h"

namespace {

using dl::test::slurp;
using Result = dl::test::CliResult;

// The folder of this test binary (build/tests): the binary under test and the scratch folder
// are found from it when CTest did not pass DELTALLM_BIN / DELTALLM_TEST_TMP.
std::string test_binary_dir() {
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string(".") : exe.parent_path().string();
}

std::string tmp_dir() {
    const char* d = std::getenv("DELTALLM_TEST_TMP");
    if (d && *d) return d;
    std::string t = test_binary_dir() + "/tmp";
    std::filesystem::create_directories(t);
    return t;
}

std::string deltallm_bin() {
    const char* b = std::getenv("DELTALLM_BIN");
    if (b && *b) return b;
    return test_binary_dir() + "/../deltallm";
}

// Runs `deltallm ARGS` with optional stdin text; stdout and stderr are captured separately.
Result deltallm(const std::string& args, const std::string& stdin_text = "") {
    const std::string bin = deltallm_bin();
    EXPECT_TRUE(std::filesystem::exists(bin)) << bin << " does not exist (set DELTALLM_BIN)";
    std::string base = tmp_dir() + "/cli_" + std::to_string(::getpid());
    {
        std::ofstream in(base + ".in", std::ios::binary);
        in << stdin_text;
    }
    return dl::test::run_captured(bin, args, base + ".in", base);
}

std::vector<std::string> lines(const std::string& s) {
    std::vector<std::string> v;
    std::istringstream ss(s);
    for (std::string l; std::getline(ss, l);) v.push_back(l);
    return v;
}

std::vector<int> parse_ids(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    std::vector<int> ids;
    std::istringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');) ids.push_back(std::stoi(item));
    return ids;
}

bool valid_utf8(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        unsigned char c = s[i];
        int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
        if (n < 0 || i + n >= s.size() + (n == 0 ? 1 : 0)) return false;
        for (int k = 1; k <= n; ++k)
            if (i + k >= s.size() || ((unsigned char)s[i + k] >> 6) != 2) return false;
        i += n + 1;
    }
    return true;
}

// A dump read back with the tests' own reader; the writer's header is padded to 64 bytes.
dl::test::NpyArray read_dump(const std::string& path) {
    dl::test::NpyArray n = dl::test::read_npy_file(path);
    EXPECT_TRUE(n.ok()) << n.error;
    EXPECT_EQ(n.data_offset % 64, 0u) << path;
    EXPECT_FALSE(n.f32.empty()) << path << " is not float32";
    return n;
}

int argmax_row(const dl::test::NpyArray& n, int64_t r) {
    const float* row = n.f32.data() + r * n.shape[1];
    return (int)(std::max_element(row, row + n.shape[1]) - row);
}

// numpy, when this machine has it, as a second and third-party reader of the dumps.
bool have_numpy() {
    return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

void expect_one_error_line(const Result& r, const char* what) {
    EXPECT_EQ(r.rc, 1) << what << "\n" << r.err;
    int n_error = 0;
    for (const std::string& l : lines(r.err)) n_error += l.rfind("error: ", 0) == 0 ? 1 : 0;
    EXPECT_EQ(n_error, 1) << what << "\n" << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << what;
}

// The CPU chain, whatever GPU driver the build has: these tests are about the front-end.
const char* kGreedy = " --temp 0 --device cpu ";

}  // namespace

TEST(Cli, RunWithTheBuiltInModelStreamsTextAndSpeeds) {
    Result r = deltallm("run -p 'Once upon a time' -n 12 --seed 1");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_GT(r.out.size(), 1u);
    EXPECT_TRUE(valid_utf8(r.out));
    // The built-in model says which it is.
    EXPECT_NE(r.err.find("using the built-in model, deltallm-tiny"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("loaded"), std::string::npos);
    EXPECT_NE(r.err.find("deltallm: prompt "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("tokens/s"), std::string::npos);
    EXPECT_NE(r.err.find("deltallm: generation "), std::string::npos) << r.err;
}

TEST(Cli, PromptIdsAndPrintIdsAreDeterministicWhenGreedy) {
    std::string args = "run --prompt-ids 5,17,300,2 --print-ids -n 8" + std::string(kGreedy);
    Result a = deltallm(args + "--seed 1"), b = deltallm(args + "--seed 2");
    ASSERT_EQ(a.rc, 0) << a.err;
    ASSERT_EQ(b.rc, 0) << b.err;
    std::vector<int> ids = parse_ids(a.out);
    EXPECT_GE(ids.size(), 1u);
    EXPECT_LE(ids.size(), 8u);
    for (int id : ids) EXPECT_TRUE(id >= 0 && id < 8192) << id;
    EXPECT_EQ(a.out, b.out);  // greedy: the seed does not matter
}

TEST(Cli, DumpedLogitsAgreeWithThePrintedIds) {
    std::string npy = tmp_dir() + "/cli_dump.npy";
    const int n_prompt = 5;
    Result r = deltallm("run --prompt-ids 1,2,3,4,5 --print-ids --ignore-eos -n 4" +
                        std::string(kGreedy) + "--dump-logits " + npy);
    ASSERT_EQ(r.rc, 0) << r.err;
    std::vector<int> ids = parse_ids(r.out);
    ASSERT_EQ(ids.size(), 4u);
    dl::test::NpyArray n = read_dump(npy);
    // Every evaluated position: the prompt's and those of the generated tokens but the last.
    ASSERT_EQ(n.shape, (std::vector<int64_t>{n_prompt + 3, 8192}));
    for (float x : n.f32) ASSERT_TRUE(std::isfinite(x));
    for (int i = 0; i < 4; ++i) EXPECT_EQ(argmax_row(n, n_prompt - 1 + i), ids[i]) << i;

    // With one token, the last row is the prompt's last position.
    std::string npy1 = tmp_dir() + "/cli_dump1.npy";
    Result r1 = deltallm("run --prompt-ids 1,2,3,4,5 --print-ids -n 1" + std::string(kGreedy) +
                         "--dump-logits " + npy1);
    ASSERT_EQ(r1.rc, 0) << r1.err;
    dl::test::NpyArray n1 = read_dump(npy1);
    ASSERT_EQ(n1.shape, (std::vector<int64_t>{n_prompt, 8192}));
    EXPECT_EQ(argmax_row(n1, n_prompt - 1), parse_ids(r1.out).at(0));

    // Chosen positions are the same rows as in the full dump, in the order asked for.
    std::string npy2 = tmp_dir() + "/cli_dump2.npy";
    Result r2 =
        deltallm("run --prompt-ids 1,2,3,4,5 --print-ids --ignore-eos -n 4" + std::string(kGreedy) +
                 "--dump-logits " + npy2 + " --dump-positions 0,-1,2,-8");
    ASSERT_EQ(r2.rc, 0) << r2.err;
    dl::test::NpyArray n2 = read_dump(npy2);
    ASSERT_EQ(n2.shape, (std::vector<int64_t>{4, 8192}));
    const int64_t want[] = {0, 7, 2, 0};
    for (int k = 0; k < 4; ++k)
        EXPECT_TRUE(std::equal(n2.f32.begin() + k * 8192, n2.f32.begin() + (k + 1) * 8192,
                               n.f32.begin() + want[k] * 8192))
            << "row " << k;

    if (have_numpy()) {
        std::string script =
            "/usr/bin/python3 -c \"import numpy as np; a = np.load('" + npy +
            "'); assert a.dtype == np.float32 and a.shape == (8, 8192), a.shape; "
            "print(','.join(str(int(np.argmax(a[i]))) for i in range(4, 8)))\" > " +
            tmp_dir() + "/cli_np.txt";
        ASSERT_EQ(std::system(script.c_str()), 0);
        EXPECT_EQ(parse_ids(slurp(tmp_dir() + "/cli_np.txt")), ids);
    }
}

TEST(Cli, SeedsReproduceAndDiffer) {
    std::string args =
        "run --prompt-ids 10,20,30 --print-ids --ignore-eos -n 24 --temp 1.0 --top-k 0 "
        "--top-p 1 --min-p 0 --device cpu --seed ";
    Result a = deltallm(args + "7"), b = deltallm(args + "7"), c = deltallm(args + "8");
    ASSERT_EQ(a.rc, 0) << a.err;
    EXPECT_EQ(parse_ids(a.out).size(), 24u);
    EXPECT_EQ(a.out, b.out);
    EXPECT_NE(a.out, c.out);
}

TEST(Cli, BadInputIsOneErrorLineAndExitCodeOne) {
    expect_one_error_line(deltallm("run -m /nonexistent/model.gguf -p hi"), "missing file");
    expect_one_error_line(deltallm("run -m " + tmp_dir() + " -p hi"), "a directory");

    std::string junk = tmp_dir() + "/cli_junk.gguf";
    std::ofstream(junk) << "this is not a GGUF file at all, just some text\n";
    expect_one_error_line(deltallm("run -m " + junk + " -p hi"), "non-GGUF file");
    expect_one_error_line(deltallm("info -m " + junk), "info of a non-GGUF file");

    std::vector<uint8_t> img = dl::test::tiny_qwen35_image();
    for (size_t keep : {img.size() / 2, img.size() - 1, (size_t)64, (size_t)3}) {
        std::string cut = tmp_dir() + "/cli_truncated.gguf";
        std::ofstream(cut, std::ios::binary).write((const char*)img.data(), (std::streamsize)keep);
        expect_one_error_line(deltallm("run -m " + cut + " -p hi -n 2"),
                              ("truncated to " + std::to_string(keep)).c_str());
    }

    expect_one_error_line(deltallm("run -p hi -n abc"), "-n abc");
    expect_one_error_line(deltallm("run -p hi --temp -1"), "--temp -1");
    expect_one_error_line(deltallm("run -p hi --top-p 0"), "--top-p 0");
    expect_one_error_line(deltallm("run -p hi --device gpu"), "--device gpu");
    expect_one_error_line(deltallm("run -p hi --no-such-flag"), "unknown flag");
    expect_one_error_line(deltallm("run -p hi -t -2"), "-t -2");
    expect_one_error_line(deltallm("run"), "no prompt");
    expect_one_error_line(deltallm("run --prompt-ids 1,x"), "bad id list");
    expect_one_error_line(deltallm("run --prompt-ids 1,99999"), "id out of range");
    expect_one_error_line(deltallm("run --prompt-ids 1,2 -n 2 --dump-logits /nonexistent/d.npy"),
                          "unwritable dump");
    expect_one_error_line(deltallm("run --prompt-ids 1,2 -n 2 --dump-logits " + tmp_dir() +
                                   "/x.npy --dump-positions 9"),
                          "dump position out of range");
    expect_one_error_line(deltallm("run -p hi -c 8 -n 1 -f /nonexistent.txt"), "two prompts");
}

TEST(Cli, ChatIsScriptableThroughStdin) {
    Result r = deltallm("--verbose chat --device cpu -n 6 --seed 3",
                        "Hello there\n\nHow are you?\n/exit\nnot read\n");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(valid_utf8(r.out));
    // Two replies: one speed report per turn under --verbose.
    int gen = 0;
    std::vector<int> prompt_tokens;
    for (const std::string& l : lines(r.err)) {
        if (l.rfind("deltallm: generation ", 0) == 0) ++gen;
        if (l.rfind("deltallm: prompt ", 0) == 0) prompt_tokens.push_back(std::stoi(l.substr(17)));
    }
    EXPECT_EQ(gen, 2) << r.err;
    ASSERT_EQ(prompt_tokens.size(), 2u);

    // The second turn sends only its own tokens (the history stays in the session): the close of
    // the first reply, the user turn and the assistant prefix, plus at most the one reply token
    // that was sampled but not yet fed.
    Result t =
        deltallm("tokenize --no-special",
                 "<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n");
    ASSERT_EQ(t.rc, 0) << t.err;
    int turn2 = (int)parse_ids(t.out).size();
    EXPECT_TRUE(prompt_tokens[1] == turn2 || prompt_tokens[1] == turn2 + 1)
        << prompt_tokens[1] << " vs " << turn2;
    EXPECT_LT(prompt_tokens[1], prompt_tokens[0] + turn2);

    Result reset = deltallm("chat --device cpu -n 4 --seed 3", "Hi\n/reset\nHi\n");
    ASSERT_EQ(reset.rc, 0) << reset.err;
    std::vector<std::string> replies = lines(reset.out);
    ASSERT_GE(replies.size(), 2u);
    // After /reset the same seed is drawn from again and the same first turn gives the same reply.
    size_t half = reset.out.size() / 2;
    EXPECT_EQ(reset.out.substr(0, half), reset.out.substr(half));

    Result empty = deltallm("chat --device cpu", "");
    EXPECT_EQ(empty.rc, 0) << empty.err;
}

// --chat-template-file replaces the model's template; what the template opens as reasoning goes
// to stderr, the answer to stdout; a template that renders past turns differently from how they
// were generated (Qwen3.5 drops the empty thinking block) still keeps the session up to the end
// of the last user message.
TEST(Cli, ChatRendersThroughATemplateFile) {
    const std::string thinking = tmp_dir() + "/thinking.jinja";
    std::ofstream(thinking) << "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                               "<|im_end|>\n{% endfor %}<|im_start|>assistant\n<think>\n";
    Result r =
        deltallm("chat --device cpu -n 6 --seed 3 --chat-template-file " + thinking, "Hi\nHo\n");
    ASSERT_EQ(r.rc, 0) << r.err;
    // The built-in model does not close the block in 6 tokens: everything it says is reasoning.
    EXPECT_EQ(r.out, "\n\n");
    EXPECT_GT(r.err.size(), 200u) << r.err;

    const char* qwen35 = DELTALLM_TEST_DATA_DIR "/templates/Qwen-Qwen3.5.jinja";
    r = deltallm(
        std::string("-v chat --device cpu -n 6 --seed 3 --think off --chat-template-file ") +
            qwen35,
        "Hi\nHo\n");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("goes back to the end of the last user turn"), std::string::npos) << r.err;

    expect_one_error_line(deltallm("chat --chat-template-file /nonexistent.jinja", "Hi\n"),
                          "missing template file");
    const std::string bad = tmp_dir() + "/bad.jinja";
    std::ofstream(bad) << "{% if %}";
    expect_one_error_line(deltallm("chat --chat-template-file " + bad, "Hi\n"), "bad template");
}

TEST(Cli, TokenizeRoundTripsThroughPieces) {
    Result r = deltallm("tokenize --no-special", "Hello world");
    ASSERT_EQ(r.rc, 0) << r.err;
    std::vector<int> ids = parse_ids(r.out);
    ASSERT_FALSE(ids.empty());
    Result p = deltallm("tokenize --no-special --show-pieces", "Hello world");
    ASSERT_EQ(p.rc, 0) << p.err;
    std::string joined;
    std::vector<std::string> ls = lines(p.out);
    ASSERT_EQ(ls.size(), ids.size());
    for (size_t i = 0; i < ls.size(); ++i) {
        size_t tab = ls[i].find('\t');
        ASSERT_NE(tab, std::string::npos);
        EXPECT_EQ(std::stoi(ls[i].substr(0, tab)), ids[i]);
        joined += ls[i].substr(tab + 2, ls[i].size() - tab - 3);  // inside the quotes
    }
    EXPECT_EQ(joined, "Hello world");
    // A control token written in the text is one token unless told otherwise.
    Result s = deltallm("tokenize --no-special", "<|im_start|>");
    Result s2 = deltallm("tokenize --no-special --no-parse-special", "<|im_start|>");
    EXPECT_EQ(parse_ids(s.out).size(), 1u);
    EXPECT_GT(parse_ids(s2.out).size(), 1u);
}

TEST(Cli, InfoSummarisesWithoutDumpingArrays) {
    Result r = deltallm("info");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("tokenizer.ggml.tokens"), std::string::npos);
    EXPECT_NE(r.out.find("[8192 x string]"), std::string::npos) << r.out;
    EXPECT_LT(lines(r.out).size(), 150u);
    EXPECT_NE(r.out.find("architecture   qwen35"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("KV cache"), std::string::npos);
    EXPECT_NE(r.out.find("recurrent state"), std::string::npos);
    EXPECT_NE(r.out.find("q8_0"), std::string::npos);
    EXPECT_NE(r.out.find("cpu "), std::string::npos);
    EXPECT_EQ(r.out.find("blk.0.attn_qkv.weight"), std::string::npos);
    // Memory at a context given by hand: the built-in model has two attention layers with one KV
    // head of 256: 2 (K, V) x 1000 x 2 x 256 x 2 bytes = 2048000 B.
    Result c = deltallm("info -c 1000");
    EXPECT_NE(c.out.find("KV cache (f16)       1.95 MiB"), std::string::npos) << c.out;

    Result t = deltallm("info --tensors");
    ASSERT_EQ(t.rc, 0);
    EXPECT_NE(t.out.find("blk.0.attn_qkv.weight"), std::string::npos);
    EXPECT_NE(t.out.find("token_embd.weight"), std::string::npos);
}

TEST(Cli, InfoListsDevicesWithoutAModel) {
    Result r = deltallm("info --devices");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("cpu: "), std::string::npos) << r.out;
    // Either the Vulkan driver lists what it sees (its features or why it has none), or the
    // build says it has no Vulkan driver; the built-in model's metadata is not printed.
    EXPECT_NE(r.out.find("vulkan"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("tokenizer.ggml.tokens"), std::string::npos) << r.out;
}

// `info --device D` shows only D's plan for the model; an unknown D is bad input.
TEST(Cli, InfoShowsThePlanOfTheDeviceAsked) {
    auto devices = [](const Result& r) {
        size_t at = r.out.find("devices:\n");
        return at == std::string::npos ? std::string() : r.out.substr(at);
    };
    Result all = deltallm("info");
    ASSERT_EQ(all.rc, 0) << all.err;
    EXPECT_NE(devices(all).find("  cpu "), std::string::npos) << all.out;
    EXPECT_NE(devices(all).find("vulkan"), std::string::npos) << all.out;

    Result cpu = deltallm("info --device cpu");
    ASSERT_EQ(cpu.rc, 0) << cpu.err;
    EXPECT_NE(devices(cpu).find("  cpu      runs: CPU chain"), std::string::npos) << cpu.out;
    EXPECT_EQ(devices(cpu).find("vulkan"), std::string::npos) << cpu.out;

    Result vk = deltallm("info --device vulkan");
    ASSERT_EQ(vk.rc, 0) << vk.err;
    EXPECT_EQ(devices(vk).find("  cpu "), std::string::npos) << vk.out;
    EXPECT_NE(devices(vk).find("vulkan"), std::string::npos) << vk.out;

    // A device index past those the driver sees is named as such, not replaced by another
    // (or the build has no Vulkan driver, or no loader, and says that).
    Result far = deltallm("info --device vulkan:99");
    ASSERT_EQ(far.rc, 0) << far.err;
    EXPECT_EQ(devices(far).find("vulkan:0 "), std::string::npos) << far.out;
    EXPECT_EQ(devices(far).find("  cpu "), std::string::npos) << far.out;
    const std::string d = devices(far);
    EXPECT_TRUE(d.find("vulkan:99: no such device") != std::string::npos ||
                d.find("not in this build") != std::string::npos ||
                d.find("  vulkan: ") != std::string::npos)
        << far.out;

    expect_one_error_line(deltallm("info --device gpu"), "info --device gpu");
}

// `info --parallel N` plans a device's paged KV cache for N sequences of the context and says so;
// a count out of range is bad input.
TEST(Cli, InfoPlansTheKvCacheForTheSequencesAsked) {
    Result r = deltallm("info --device vulkan -c 4096 --parallel 8");
    ASSERT_EQ(r.rc, 0) << r.err;
    if (r.out.find("vulkan:0 (") != std::string::npos &&
        r.out.find("declines") == std::string::npos) {
        EXPECT_NE(r.out.find("8 sequences of 4096 tokens at once"), std::string::npos) << r.out;
    }
    expect_one_error_line(deltallm("info --parallel 0"), "info --parallel 0");
    expect_one_error_line(deltallm("info --parallel 5000"), "info --parallel 5000");
}

// A context that does not fit the Vulkan device is shrunk to the largest that does, and the user
// is told so (the built-in model's KV cache for a billion tokens is 2 TB).
TEST(Cli, VulkanSaysWhenTheContextAskedDoesNotFit) {
    if (!dl::test::has_vulkan_device()) GTEST_SKIP() << "no Vulkan device here";
    Result r = deltallm("run --device vulkan -c 1000000000 -p hi -n 2");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("a context of 1000000000 tokens does not fit"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("sessions hold up to"), std::string::npos) << r.err;
    // A context that fits says nothing of the kind.
    Result ok = deltallm("run --device vulkan -c 256 -p hi -n 2");
    ASSERT_EQ(ok.rc, 0) << ok.err;
    EXPECT_EQ(ok.err.find("does not fit"), std::string::npos) << ok.err;
}

// DELTALLM_VK_TRACE writes the token command's stages to stderr as it is recorded, each role with
// its kernels; without it nothing of the kind; a value that is not a boolean is one error line.
TEST(Cli, VulkanTraceNamesTheTokenCommandsStages) {
    if (!dl::test::has_vulkan_device()) GTEST_SKIP() << "no Vulkan device here";
    const std::string args = "run --device vulkan --prompt-ids 1,2,3 -n 2";
    auto with = [&](const char* value) {
        setenv("DELTALLM_VK_TRACE", value, 1);
        Result r = deltallm(args);
        unsetenv("DELTALLM_VK_TRACE");
        return r;
    };
    Result r = with("1");
    ASSERT_EQ(r.rc, 0) << r.err;
    for (const char* want : {"vk trace: embed: get_rows_", "vk trace: gemv in: gemv_",
                             "vk trace: deltanet: deltanet_step", "vk trace: attention: attn_",
                             "vk trace: gemv ffn: gemv_", "vk trace: head: "})
        EXPECT_NE(r.err.find(want), std::string::npos) << want << "\n" << r.err;
    Result off = with("0");
    ASSERT_EQ(off.rc, 0) << off.err;
    EXPECT_EQ(off.err.find("vk trace"), std::string::npos) << off.err;
    Result bad = with("maybe");
    expect_one_error_line(bad, "DELTALLM_VK_TRACE=maybe");
    EXPECT_NE(bad.err.find("DELTALLM_VK_TRACE"), std::string::npos) << bad.err;
}

// A context whose session cannot fit in the machine's memory is one clear error with the numbers,
// not an allocation failure (the built-in model's KV cache is 2 KiB a token: 200 TB here).
TEST(Cli, CpuSessionLargerThanTheMachineIsAnError) {
    // Past the largest context accepted (2^30 tokens): refused before anything is sized.
    Result r = deltallm("run --device cpu -c 100000000000 -p hi -n 2");
    expect_one_error_line(r, "a 1e11-token context");
    EXPECT_NE(r.err.find("-c"), std::string::npos) << r.err;
    // The largest context takes the built-in model about 2 TiB on the CPU chain: more than this
    // machine has, unless it is one of the very largest (then there is nothing to refuse).
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if ((double)pages * (double)page > 400.0 * (1ull << 30)) GTEST_SKIP() << "too much memory";
    r = deltallm("run --device cpu -c 1073741824 -p hi -n 2");
    expect_one_error_line(r, "a 2^30-token context on the CPU chain");
    EXPECT_NE(r.err.find("a session of 1073741824 tokens needs"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("-c"), std::string::npos) << r.err;
}

TEST(Cli, HelpAndNoArguments) {
    Result h = deltallm("--help");
    EXPECT_EQ(h.rc, 0);
    EXPECT_NE(h.out.find("run"), std::string::npos);
    Result n = deltallm("");
    EXPECT_EQ(n.rc, 0);
    Result rh = deltallm("run --help");
    EXPECT_EQ(rh.rc, 0);
    EXPECT_NE(rh.out.find("--dump-logits"), std::string::npos);
}
