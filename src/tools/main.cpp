// The deltallm binary: parses the command line, runs one subcommand, and turns a dl::Error into
// one line on stderr and exit code 1.
#include <cstdio>
#include <map>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "tools/tool.h"

namespace dl::tools {
std::vector<ToolEntry>& registry() {
    static std::vector<ToolEntry> r;
    return r;
}
}  // namespace dl::tools

int main(int argc, char** argv) {
    using namespace dl;
    CLI::App app{"deltallm: run large language models from GGUF files"};
    app.require_subcommand(0, 1);
    bool help_env = false, version = false;
    app.add_flag("--help-env", help_env, "list the environment variables deltallm reads");
    app.add_flag("--version", version, "print the version");

    std::map<CLI::App*, tools::Run> runs;
    for (auto& t : tools::registry()) {
        CLI::App* sub = app.add_subcommand(t.name, t.help);
        runs[sub] = t.setup(*sub);
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    if (help_env) {
        std::fputs(env::describe().c_str(), stdout);
        return 0;
    }
    if (version) {
        std::puts("deltallm " DELTALLM_VERSION);
        return 0;
    }
    try {
        for (auto& [sub, run] : runs)
            if (sub->parsed()) return run();
        std::fputs(app.help().c_str(), stdout);
        return 0;
    } catch (const Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "error: out of memory\n");
        return 1;
    }
}
