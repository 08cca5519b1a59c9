// `deltallm batch` end to end with the built-in model: sixteen prompts (text and chat, greedy and
// seeded sampling, their own lengths) served four at a time in small steps give, line for line,
// the text of sixteen separate `deltallm run` calls; bad input files are one error line and leave
// no output behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tools/deltallm_cli.h"

namespace dl {
namespace {

using json = nlohmann::json;

std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

TEST(BatchCli, SixteenPromptsEqualSixteenSoloRuns) {
    const std::string dir = test::tmp_dir();
    const std::string in = dir + "/batch16.jsonl", out = dir + "/batch16.out.jsonl";
    std::filesystem::remove(out);
    struct P {
        std::string prompt;
        int n;
        double temp;
        int seed;
    };
    std::vector<P> ps;
    const char* words[] = {"The", "A quiet", "Once upon a time", "Rivers", "Seven", "In the"};
    for (int i = 0; i < 16; ++i) {
        std::string p = words[i % 6];
        for (int k = 0; k < i % 5; ++k) p += " and more words " + std::to_string(i * 31 + k);
        ps.push_back({p, 1 + (i * 5) % 17, i % 4 == 1 ? 0.8 : 0.0, 100 + i});
    }
    {
        std::ofstream f(in);
        for (const P& p : ps)
            f << json{{"prompt", p.prompt},
                      {"max_tokens", p.n},
                      {"temperature", p.temp},
                      {"seed", p.seed}}
                     .dump()
              << "\n";
    }
    auto r = test::deltallm_run("batch -i " + in + " -o " + out +
                                " --parallel 4 --batch-tokens 12 --top-k 40");
    ASSERT_EQ(r.rc, 0) << r.err;
    std::ifstream f(out);
    std::vector<json> got;
    for (std::string l; std::getline(f, l);) got.push_back(json::parse(l));
    ASSERT_EQ(got.size(), ps.size());
    for (size_t i = 0; i < ps.size(); ++i) {
        SCOPED_TRACE(::testing::Message() << "prompt " << i);
        EXPECT_EQ(got[i]["index"], i);
        auto solo = test::deltallm_run(
            "run -p " + quote(ps[i].prompt) + " -n " + std::to_string(ps[i].n) + " --temp " +
            std::to_string(ps[i].temp) + " --seed " + std::to_string(ps[i].seed) + " --top-k 40");
        ASSERT_EQ(solo.rc, 0) << solo.err;
        ASSERT_FALSE(solo.out.empty());
        EXPECT_EQ(got[i]["text"].get<std::string>(), solo.out.substr(0, solo.out.size() - 1));
        // All the asked-for tokens, or fewer ending at an end-of-generation token.
        const int n = got[i]["completion_tokens"].get<int>();
        EXPECT_EQ(got[i]["finish_reason"], n == ps[i].n ? "length" : "stop");
        EXPECT_LE(n, ps[i].n);
    }
}

// response_format json_object and json_schema on text and chat lines: every line that ended is a
// JSON object (the schema's lines of its keys and types), and every line opens one.
TEST(BatchCli, JsonObjectLinesAreObjects) {
    const std::string dir = test::tmp_dir();
    const std::string in = dir + "/batch_json.jsonl", out = dir + "/batch_json.out.jsonl";
    std::filesystem::remove(out);
    {
        std::ofstream f(in);
        const json format = {{"type", "json_object"}};
        const json schema = {
            {"type", "json_schema"},
            {"json_schema",
             {{"name", "c"},
              {"schema",
               {{"type", "object"},
                {"properties",
                 {{"color", {{"enum", {"red", "blue"}}}}, {"n", {{"type", "integer"}}}}},
                {"required", {"color", "n"}},
                {"additionalProperties", false}}}}}};
        for (int i = 0; i < 8; ++i) {
            json line = {{"max_tokens", 96},
                         {"temperature", i < 2 ? 0.0 : 1.0},
                         {"seed", i},
                         {"response_format", i < 6 ? format : schema}};
            if (i % 2)
                line["messages"] = json::array({{{"role", "user"}, {"content", "Describe a cat"}}});
            else
                line["prompt"] = "A cat, as JSON:";
            f << line.dump() << "\n";
        }
    }
    auto r = test::deltallm_run("batch -i " + in + " -o " + out + " --parallel 3");
    ASSERT_EQ(r.rc, 0) << r.err;
    std::ifstream f(out);
    int lines = 0, ended = 0;
    for (std::string l; std::getline(f, l); ++lines) {
        const json j = json::parse(l);
        const std::string text = j["text"];
        EXPECT_EQ(text.substr(text.find_first_not_of(" \t\r\n")).front(), '{') << text;
        if (j["finish_reason"] != "stop") continue;
        ++ended;
        ASSERT_TRUE(json::accept(text)) << text;
        const json o = json::parse(text);
        EXPECT_TRUE(o.is_object()) << text;
        if (lines >= 6) {  // the schema's lines
            EXPECT_EQ(o.size(), 2u) << text;
            EXPECT_TRUE(o.value("color", "") == "red" || o.value("color", "") == "blue") << text;
            EXPECT_TRUE(o.contains("n") && o["n"].is_number_integer()) << text;
        }
    }
    EXPECT_EQ(lines, 8);
    EXPECT_GE(ended, 2);  // at least the greedy lines close their objects
}

TEST(BatchCli, BadInputIsOneErrorLineAndNoOutput) {
    const std::string dir = test::tmp_dir();
    const std::string in = dir + "/batch_bad.jsonl", out = dir + "/batch_bad.out.jsonl";
    {
        std::ofstream o(out);
        o << "earlier results\n";
    }
    auto check = [&](const std::string& body, const std::string& part) {
        std::ofstream(in) << body;
        auto r = test::deltallm_run("batch -i " + in + " -o " + out);
        test::expect_one_error_line(r, body, part);
        std::ifstream f(out);
        std::string kept((std::istreambuf_iterator<char>(f)), {});
        EXPECT_EQ(kept, "earlier results\n") << body;
    };
    check("{\"prompt\":\"a\"}\n{\"prompt\":\"b\"}\nnot json\n", "line 3");
    check("{\"prompt\":\"\xff\xfe\"\n", "line 1 is not JSON (at byte");  // bytes not echoed
    check("{\"prompt\":\"a\",\"messages\":[]}\n", "line 1");
    check("{\"prompt\":5}\n", "\"prompt\" must be a string");
    check("{\"prompt\":\"a\",\"max_tokens\":0}\n", "max_tokens");
    check("{\"prompt\":\"a\",\"max_tokens\":\"many\"}\n", "wrong type");
    check("{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}\n", "role must be");
    check("\n\n", "holds no prompts");
    check("{\"prompt\":\"a\",\"response_format\":{\"type\":\"json_schema\"}}\n", "response_format");
    check(
        "{\"prompt\":\"a\",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
        "{\"schema\":{\"type\":\"object\",\"minProperties\":1}}}}\n",
        "minProperties");
    auto r = test::deltallm_run("batch -i " + in + " -o " + out + " --parallel 0");
    test::expect_one_error_line(r, "--parallel 0", "--parallel");
}

// bench -b: one row per sequence count with positive aggregate rates, and a ceiling that grows
// with the count while the weights' read is the bound (B sequences share each read).
TEST(BenchBatched, RowsPerSequenceCountWithTheirCeilings) {
    const std::string dir = test::tmp_dir(), model = dir + "/bench_batched.gguf";
    auto s = test::deltallm_run("synth --arch qwen3 --shape tiny --type q8_0 -o " + model);
    ASSERT_EQ(s.rc, 0) << s.err;
    auto r = test::deltallm_run("bench --device cpu -m " + model +
                                " -b 1,3 -p 8 -n 4 -r 1 -o json --bw-gbps 1 --peak-gflops 1e6");
    ASSERT_EQ(r.rc, 0) << r.err;
    const json j = json::parse(r.out);
    ASSERT_EQ(j["batched_rows"].size(), 2u);
    const json& b1 = j["batched_rows"][0];
    const json& b3 = j["batched_rows"][1];
    EXPECT_EQ(b1["test"], "B1 pp8+tg4");
    EXPECT_EQ(b3["n_seq"], 3);
    for (const json* row : {&b1, &b3}) {
        EXPECT_GT((*row)["pp_avg_ts"].get<double>(), 0);
        EXPECT_GT((*row)["tg_avg_ts"].get<double>(), 0);
    }
    // 1 GB/s and a compute peak far away: the ceiling is the read, three times for three.
    EXPECT_NEAR(b3["tg_ceiling_ts"].get<double>(), 3 * b1["tg_ceiling_ts"].get<double>(),
                1e-6 * b3["tg_ceiling_ts"].get<double>());
    EXPECT_NEAR(b1["tg_ceiling_ts"].get<double>(), 1e9 / j["tg_bytes_per_token"].get<double>(),
                1e-6 * b1["tg_ceiling_ts"].get<double>());
    auto bad = test::deltallm_run("bench --device cpu -m " + model + " -b 0 -r 1");
    test::expect_one_error_line(bad, "-b 0", "-b");
}

}  // namespace
}  // namespace dl
