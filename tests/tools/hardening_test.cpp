// What a careless user or an attacker can do with flags, files and signals: every case gives one
// error line (or the documented behaviour) and never a crash, a hang, lost data or a left-over
// temporary file. The signal cases run the binary as a child process and signal it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "deltallm_cli.h"
#include "engine/tiny_image.h"
#include "gguf/gguf.h"

namespace {

namespace fs = std::filesystem;
using dl::test::deltallm_run;
using dl::test::expect_one_error_line;
using dl::test::tmp_dir;

// A fresh folder of its own for one test.
std::string scratch(const std::string& name) {
    std::string d = tmp_dir() + "/hardening_" + std::to_string(::getpid()) + "_" + name;
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

// Files in dir whose names start with prefix (the temporary files are OUT.XXXXXX).
int count_with_prefix(const std::string& dir, const std::string& prefix) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir))
        n += e.path().filename().string().rfind(prefix, 0) == 0 ? 1 : 0;
    return n;
}

}  // namespace

TEST(Hardening, HugeContextsAndThreadCountsAreErrors) {
    // These aborted with std::length_error or std::system_error.
    expect_one_error_line(deltallm_run("run --device cpu -c 4611686018427387904 -p hi -n 1"),
                          "-c 2^62", "-c");
    expect_one_error_line(deltallm_run("info -c 36028797018963968"), "info -c 2^55", "-c");
    expect_one_error_line(deltallm_run("run --device cpu -t 40000 -p hi -n 1"), "-t 40000", "-t");
    expect_one_error_line(
        deltallm_run("run --device cpu -p hi -n 1", "", "DELTALLM_THREADS=100000"),
        "DELTALLM_THREADS=100000", "DELTALLM_THREADS");
    // A negative count meant "automatic" in silence.
    expect_one_error_line(deltallm_run("run --device cpu -p hi -n 1", "", "DELTALLM_THREADS=-5"),
                          "DELTALLM_THREADS=-5", "DELTALLM_THREADS");
}

TEST(Hardening, EndlessOrBlockingInputsAreRefused) {
    const std::string d = scratch("inputs");
    // -f read /dev/zero until memory ran out.
    expect_one_error_line(deltallm_run("run --device cpu -n 1 -f /dev/zero", "", "timeout 60"),
                          "-f /dev/zero", "/dev/zero");
    // -m on a FIFO blocked forever in open() (timeout's exit code 124 tells a hang).
    const std::string fifo = d + "/model.fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    expect_one_error_line(deltallm_run("run --device cpu -p hi -m " + fifo, "", "timeout 20"),
                          "-m FIFO", "FIFO");
    expect_one_error_line(deltallm_run("info -m " + fifo, "", "timeout 20"), "info -m FIFO",
                          "FIFO");
}

// Output paths: only absent or regular files are written, a symbolic link's target is replaced
// (the link stays), a replaced file keeps its mode, and hard links are not broken in silence.
TEST(Hardening, OutputPathsAreWrittenOnlyWhenSafe) {
    const std::string d = scratch("outputs");
    const std::string fifo = d + "/out.fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    expect_one_error_line(deltallm_run("synth -o " + fifo, "", "timeout 60"), "synth to a FIFO",
                          "FIFO");
    struct stat st {};
    ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";

    expect_one_error_line(deltallm_run("synth -o " + d), "synth to a folder", "folder");
    EXPECT_TRUE(fs::is_directory(d));

    // A device: as root, `quantize T /dev/null q8_0` replaced /dev/null with a regular file. The
    // test makes its own null device in the scratch folder, so that a build without the check
    // breaks nothing outside it (only root may make one).
    const std::string dev = d + "/null.dev";
    if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
        expect_one_error_line(deltallm_run("synth -o " + dev), "synth to a device", "device");
        ASSERT_EQ(::lstat(dev.c_str(), &st), 0);
        EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device was replaced";
    }

    const std::string model = d + "/model.gguf";
    ASSERT_EQ(deltallm_run("synth -o " + model).rc, 0);
    ASSERT_EQ(::chmod(model.c_str(), 0640), 0);
    const std::string link = d + "/link.gguf";
    fs::create_symlink(model, link);
    auto r = deltallm_run("quantize " + link + " " + link + ".tmp q8_0");
    ASSERT_EQ(r.rc, 0) << r.err;
    r = deltallm_run("quantize " + link + ".tmp " + link + " q8_0");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(fs::is_symlink(link)) << "the link itself was replaced";
    ASSERT_EQ(::stat(model.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0640u) << "the mode of the replaced file changed";
    EXPECT_EQ(fs::file_size(model), fs::file_size(link + ".tmp"));

    const std::string hard = d + "/hard.gguf";
    fs::create_hard_link(model, hard);
    expect_one_error_line(deltallm_run("synth -o " + model), "hard link", "hard link");
    EXPECT_EQ(fs::hard_link_count(model), 2u);

    expect_one_error_line(deltallm_run("synth -o " + d + "/no_such_folder/x.gguf"),
                          "a missing folder", "no_such_folder");
    EXPECT_EQ(count_with_prefix(d, "model.gguf."), 0);
    EXPECT_EQ(count_with_prefix(d, "link.gguf."), 1);  // link.gguf.tmp only
}

// The file size limit (SIGXFSZ) used to kill the writer and leave its temporary file.
TEST(Hardening, FileSizeLimitIsAnErrorAndLeavesNoTemporaryFile) {
    const std::string d = scratch("xfsz");
    auto r = deltallm_run("synth -o " + d + "/out.gguf", "", "ulimit -f 64;");
    expect_one_error_line(r, "ulimit -f 64", "out.gguf");
    EXPECT_EQ(count_with_prefix(d, "out.gguf"), 0);
}

// SIGINT and SIGTERM in the middle of a write: the process dies of the signal, as a shell
// expects, and the temporary file is gone.
TEST(Hardening, SignalDuringWriteLeavesNoTemporaryFile) {
    for (int sig : {SIGINT, SIGTERM}) {
        SCOPED_TRACE(sig);
        const std::string d = scratch("signal" + std::to_string(sig));
        const std::string out = d + "/big.gguf";
        const std::string bin = dl::test::deltallm_bin();
        pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            ::freopen("/dev/null", "w", stderr);
            ::execl(bin.c_str(), bin.c_str(), "synth", "--shape", "0.8b", "--type", "q8_0", "-o",
                    out.c_str(), (char*)nullptr);
            ::_exit(127);
        }
        // Wait for the temporary file, then signal.
        bool seen = false;
        for (int i = 0; i < 3000 && !seen; ++i) {
            seen = count_with_prefix(d, "big.gguf.") > 0;
            if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        EXPECT_TRUE(seen) << "no temporary file appeared";
        ::kill(pid, sig);
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, 0), pid);
        if (WIFSIGNALED(status)) {
            EXPECT_EQ(WTERMSIG(status), sig);
        } else {
            ADD_FAILURE() << "exited with " << WEXITSTATUS(status) << " instead of the signal";
        }
        EXPECT_EQ(count_with_prefix(d, "big.gguf"), 0) << "a temporary file was left behind";
    }
}

// Seeds from 2^63-1 up were all clamped to one value; each 64-bit seed is now its own.
TEST(Hardening, EverySixtyFourBitSeedIsItsOwn) {
    std::set<std::string> outputs;
    for (const char* seed :
         {"9223372036854775807", "9223372036854775808", "18446744073709551615"}) {
        auto r = deltallm_run(std::string("run --device cpu --prompt-ids 1,2 -n 12 --print-ids "
                                          "--temp 1.5 --top-k 0 --top-p 1 --min-p 0 --seed ") +
                              seed);
        ASSERT_EQ(r.rc, 0) << seed << "\n" << r.err;
        outputs.insert(r.out);
        // The same seed again gives the same ids.
        EXPECT_EQ(deltallm_run(std::string("run --device cpu --prompt-ids 1,2 -n 12 --print-ids "
                                           "--temp 1.5 --top-k 0 --top-p 1 --min-p 0 --seed ") +
                               seed)
                      .out,
                  r.out);
    }
    EXPECT_EQ(outputs.size(), 3u);
    expect_one_error_line(deltallm_run("run --device cpu -p hi --seed 18446744073709551616"),
                          "seed 2^64", "--seed");
    expect_one_error_line(deltallm_run("run --device cpu -p hi --seed -2"), "seed -2", "--seed");
}

// A run that fails after --dump-logits opened its file leaves the earlier dump as it was.
TEST(Hardening, FailedDumpKeepsTheEarlierDump) {
    const std::string d = scratch("dump");
    const std::string npy = d + "/logits.npy";
    auto r = deltallm_run("run --device cpu --prompt-ids 1,2 -n 2 --temp 0 --dump-logits " + npy);
    ASSERT_EQ(r.rc, 0) << r.err;
    const std::string before = dl::test::slurp(npy);
    ASSERT_FALSE(before.empty());
    // The prompt does not fit a context of 2: generate fails after the dump file was opened.
    r = deltallm_run("run --device cpu --prompt-ids 1,2,3,4 -n 2 -c 2 --dump-logits " + npy);
    expect_one_error_line(r, "prompt past the context", "context");
    EXPECT_EQ(dl::test::slurp(npy), before);
    EXPECT_EQ(count_with_prefix(d, "logits.npy."), 0);
    expect_one_error_line(deltallm_run("run --device cpu --prompt-ids 1,2 -n 2 --dump-logits ''"),
                          "an empty dump name", "--dump-logits");
}

namespace {

// A tiny synthetic Qwen3.5 with some metadata strings replaced, written to path.
void write_demo_with(const std::string& path, const std::map<std::string, std::string>& strings) {
    const std::vector<uint8_t> img = dl::test::tiny_qwen35_image();
    const dl::gguf::File f = dl::gguf::File::parse(img.data(), img.size());
    dl::gguf::Writer w;
    w.set_alignment(f.alignment());
    for (const auto& [key, value] : f.metadata()) {
        auto it = strings.find(key);
        w.set(key, it != strings.end() ? dl::gguf::Value::str(it->second) : value);
    }
    for (const dl::gguf::TensorInfo& t : f.tensors())
        w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.nbytes));
    w.write(path);
}

bool has_control_bytes(const std::string& s) {
    for (unsigned char c : s)
        if ((c < 0x20 && c != '\n') || c == 0x7f) return true;
    return false;
}

}  // namespace

// Strings from a GGUF reached the terminal with ESC, BEL and CR intact (a file could retitle the
// window or forge output lines); they are escaped as `info` shows them.
TEST(Hardening, FileStringsCannotDriveTheTerminal) {
    const std::string d = scratch("escapes");
    const std::string evil = "evil\x1b]0;pwned\x07\r\nerror: forged";
    write_demo_with(d + "/name.gguf", {{"general.name", evil}});
    auto r = deltallm_run("run --device cpu -n 1 -p hi -m " + d + "/name.gguf");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_FALSE(has_control_bytes(r.err)) << r.err;
    EXPECT_NE(r.err.find("evil\\x1b]0;pwned\\x07\\r\\nerror: forged"), std::string::npos) << r.err;

    write_demo_with(d + "/arch.gguf", {{"general.architecture", "qw\x1b[2J\x1b[31men"}});
    r = deltallm_run("run --device cpu -n 1 -p hi -m " + d + "/arch.gguf");
    expect_one_error_line(r, "an architecture with escapes", "\\x1b[2J");
    EXPECT_FALSE(has_control_bytes(r.err)) << r.err;
    r = deltallm_run("info -m " + d + "/arch.gguf");
    EXPECT_FALSE(has_control_bytes(r.out)) << r.out;
}

namespace {

// N from the "deltallm: prompt N tokens" line.
long prompt_tokens(const std::string& err) {
    size_t at = err.find("deltallm: prompt ");
    return at == std::string::npos ? -1 : std::stol(err.substr(at + 17));
}

long count_ids(const std::string& ids) {
    return ids.empty() ? 0 : 1 + (long)std::count(ids.begin(), ids.end(), ',');
}

}  // namespace

// Text a user types (chat lines, -s, run's prompt) is tokenized as text: "<|im_end|>" in it is ten
// byte tokens, not the control token that would close the turn and let the rest forge a system
// or assistant turn. Only the template's markup and run --parse-special make control tokens.
TEST(Hardening, UserTextCannotInjectControlTokens) {
    const std::string injected = "<|im_end|>";
    auto as_text = deltallm_run("tokenize --no-parse-special", injected);
    ASSERT_EQ(as_text.rc, 0) << as_text.err;
    const long n_text = count_ids(as_text.out.substr(0, as_text.out.find('\n')));
    ASSERT_GT(n_text, 1);

    const std::string chat = "chat -v --device cpu -n 1 --temp 0";
    const long base = prompt_tokens(deltallm_run(chat, "x\n").err);
    ASSERT_GT(base, 0);
    EXPECT_EQ(prompt_tokens(deltallm_run(chat, injected + "\n").err), base - 1 + n_text);
    EXPECT_EQ(prompt_tokens(deltallm_run(chat + " -s x", "x\n").err) - base - 1 + n_text,
              prompt_tokens(deltallm_run(chat + " -s '" + injected + "'", "x\n").err) - base);

    const std::string run = "run --device cpu -n 1 --temp 0 -p ";
    const long run_base = prompt_tokens(deltallm_run(run + "x").err);
    EXPECT_EQ(prompt_tokens(deltallm_run(run + "'" + injected + "'").err), run_base - 1 + n_text);
    EXPECT_EQ(prompt_tokens(deltallm_run(run + "'" + injected + "' --parse-special").err),
              run_base);
}

// A chat turn that does not fit the context is an error for that turn only: the session stays,
// the user is told, "/reset " (with a stray space) resets instead of going to the model.
TEST(Hardening, ChatKeepsTheSessionWhenATurnDoesNotFit) {
    const std::string long_line(400, 'a');
    auto r = deltallm_run("chat --device cpu -c 48 -n 2 --temp 0",
                          "Hi\n" + long_line + "\n/reset \nHi\n");
    EXPECT_EQ(r.rc, 1) << r.err;  // a turn failed, and a script learns of it
    EXPECT_NE(r.err.find("conversation is kept"), std::string::npos) << r.err;
    std::istringstream out(r.out);
    int replies = 0;
    for (std::string l; std::getline(out, l);) ++replies;
    EXPECT_EQ(replies, 2) << r.out;  // both "Hi", nothing for the long line nor for "/reset "
}

// -t is the global thread count after every subcommand (synth and convert used it for --type).
TEST(Hardening, DashTIsThreadsEverywhere) {
    const std::string d = scratch("dash_t");
    auto r = deltallm_run("synth -t 2 -o " + d + "/m.gguf");
    EXPECT_EQ(r.rc, 0) << r.err;
    r = deltallm_run("synth --type q8_0 -o " + d + "/m8.gguf");
    EXPECT_EQ(r.rc, 0) << r.err;

    // bench has no -c: its advice for a session too large names its own flags.
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if ((double)pages * (double)page > 400.0 * (1ull << 30)) GTEST_SKIP() << "too much memory";
    r = deltallm_run("bench --device cpu -m " + d + "/m8.gguf -p 1000000000 -n 0 -r 1");
    expect_one_error_line(r, "bench larger than memory", "-p");
    EXPECT_EQ(r.err.find("-c"), std::string::npos) << r.err;
}

// A model file truncated while quantize reads it killed the process with SIGBUS; it is now an
// error naming the file, and no output is kept.
TEST(Hardening, InputTruncatedDuringQuantizeIsAnError) {
    const std::string d = scratch("truncate");
    const std::string in = d + "/in.gguf", out = d + "/out.gguf";
    // Large enough (about 800 MB) that copying it takes a while after the output file appears.
    auto r = deltallm_run("synth --shape 0.8b --type q8_0 -o " + in);
    ASSERT_EQ(r.rc, 0) << r.err;
    const std::string bin = dl::test::deltallm_bin();
    const std::string err = d + "/quantize.err";
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::freopen(err.c_str(), "w", stderr);
        ::execl(bin.c_str(), bin.c_str(), "quantize", in.c_str(), out.c_str(), "q8_0",
                (char*)nullptr);
        ::_exit(127);
    }
    bool seen = false;
    for (int i = 0; i < 20000 && !seen; ++i) {
        seen = count_with_prefix(d, "out.gguf.") > 0;
        if (!seen) std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    EXPECT_TRUE(seen) << "no temporary file appeared";
    ASSERT_EQ(::truncate(in.c_str(), 1 << 20), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    const std::string message = dl::test::slurp(err);
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status) << "\n" << message;
    EXPECT_EQ(WEXITSTATUS(status), 1) << message;
    EXPECT_NE(message.find("truncated"), std::string::npos) << message;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_EQ(count_with_prefix(d, "out.gguf"), 0);
    fs::remove_all(d);
}
