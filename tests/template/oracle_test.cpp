// Renders every committed chat template (tests/data/templates/*.jinja) on every conversation of
// conversations.json with Python's jinja2, set up as transformers' apply_chat_template sets it up
// (scripts/template/oracle.py), and with our engine: the outputs must be byte-identical, or both
// must fail.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "template/template.h"

namespace dl::tmpl {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

fs::path data_dir() {
    if (const char* d = std::getenv("DELTALLM_TEST_DATA")) return d;
    return fs::path(__FILE__).parent_path().parent_path() / "data";
}
fs::path tmp_dir() {
    if (const char* d = std::getenv("DELTALLM_TEST_TMP")) return d;
    return fs::temp_directory_path();
}

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + p.string());
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

constexpr int64_t kNow = 1721952000;  // 2024-07-26: strftime_now() in both renderers

struct Job {
    std::string template_name, conversation;
    std::string source;
    ojson context;
};

// The context transformers passes: messages, tools (None when there are none), documents,
// add_generation_prompt, the special tokens, then the extra keyword arguments.
ojson make_context(const ojson& conversation, const ojson& tokens) {
    ojson c = ojson::object();
    c["messages"] = conversation["messages"];
    c["tools"] = conversation.contains("tools") ? conversation["tools"] : ojson();
    c["documents"] = ojson();
    c["add_generation_prompt"] = conversation.value("add_generation_prompt", true);
    c["bos_token"] = tokens["bos_token"];
    c["eos_token"] = tokens["eos_token"];
    if (conversation.contains("kwargs"))
        for (const auto& [k, v] : conversation["kwargs"].items()) c[k] = v;
    return c;
}

// Renders the jobs with scripts/template/oracle.py; one result per job: {"output"} or {"error"}.
ojson run_oracle(const std::vector<Job>& jobs) {
    ojson request = ojson::array();
    for (const auto& j : jobs)
        request.push_back({{"template", j.source}, {"context", j.context}, {"now", kNow}});
    const std::string tag = std::to_string(getpid());
    const fs::path in = tmp_dir() / ("template_jobs." + tag + ".json");
    const fs::path out = tmp_dir() / ("template_oracle." + tag + ".json");
    std::ofstream(in, std::ios::binary) << request.dump();
    const fs::path script = data_dir() / ".." / ".." / "scripts" / "template" / "oracle.py";
    // The first python3 that has jinja2: the one on PATH, else Debian's, where setup.sh installs
    // python3-jinja2 (a python3 of its own first on PATH does not see Debian's packages).
    const std::string cmd =
        "sh -c 'for py in python3 /usr/bin/python3; do \"$py\" -c \"import jinja2\" "
        "2>/dev/null && exec \"$py\" \"$0\" \"$1\" \"$2\"; done; "
        "echo no python3 with jinja2 >&2; exit 1' '" +
        script.string() + "' '" + in.string() + "' '" + out.string() + "' 2>&1";
    std::string log;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("cannot run python3");
    char buf[512];
    while (fgets(buf, sizeof buf, p)) log += buf;
    if (pclose(p) != 0)
        throw std::runtime_error("the jinja2 reference failed (" + cmd + "): " + log +
                                 " -- install python3-jinja2 (scripts/setup.sh)");
    ojson want = ojson::parse(read_file(out));
    fs::remove(in);
    fs::remove(out);
    if (want.size() != jobs.size()) throw std::runtime_error("the reference skipped jobs");
    return want;
}

// Holds our rendering of each job against the reference's; returns how many rendered there.
int expect_same(const std::vector<Job>& jobs, const ojson& want, size_t first, size_t count) {
    int rendered = 0;
    for (size_t i = first; i < first + count; ++i) {
        const Job& j = jobs[i];
        SCOPED_TRACE(j.template_name + " on " + j.conversation);
        RenderOptions options;
        options.now = kNow;
        std::string got, error;
        try {
            got = render(j.source, j.context, options);
        } catch (const Error& e) {
            error = e.what();
        }
        if (want[i].contains("error")) {
            EXPECT_FALSE(error.empty())
                << "jinja2 fails (" << want[i]["error"].get<std::string>() << ") but we render:\n"
                << got;
        } else {
            ++rendered;
            EXPECT_EQ(error, "");
            EXPECT_EQ(got, want[i]["output"].get<std::string>());
        }
    }
    return rendered;
}

TEST(ChatTemplateOracle, EveryTemplateOnEveryConversationMatchesJinja2) {
    const fs::path dir = data_dir() / "templates";
    const ojson conversations =
        ojson::parse(read_file(dir / "conversations.json"))["conversations"];
    const ojson tokens = ojson::parse(read_file(dir / "special_tokens.json"));
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".jinja") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    ASSERT_GE(files.size(), 10u);
    std::vector<Job> jobs;
    for (const auto& f : files) {
        const std::string name = f.filename().string();
        ASSERT_TRUE(tokens.contains(name)) << name << " has no entry in special_tokens.json";
        const std::string source = read_file(f);
        for (const auto& c : conversations)
            jobs.push_back(
                {name, c["name"].get<std::string>(), source, make_context(c, tokens[name])});
    }
    const ojson want = run_oracle(jobs);
    for (size_t t = 0; t < files.size(); ++t) {
        const size_t n = conversations.size();
        EXPECT_GE(expect_same(jobs, want, t * n, n), 5)
            << files[t].filename() << ": jinja2 renders too few of the conversations to compare";
    }
}

TEST(ChatTemplateOracle, SnippetsOfEachConstructMatchJinja2) {
    const ojson snippets = ojson::parse(read_file(data_dir() / "templates" / "snippets.json"));
    std::vector<Job> jobs;
    for (const auto& s : snippets["snippets"]) {
        const std::string source = s.get<std::string>();
        jobs.push_back({"snippet", source, source, snippets["context"]});
    }
    ASSERT_GE(jobs.size(), 100u);
    const ojson want = run_oracle(jobs);
    // most snippets render; the error cases at the end must fail in both
    EXPECT_GE(expect_same(jobs, want, 0, jobs.size()), 80);
}

}  // namespace
}  // namespace dl::tmpl
