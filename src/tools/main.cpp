// The deltallm binary: parses the command line, runs one subcommand, and turns any exception into
// one line on stderr and exit code 1.
#include <cstdio>
#include <map>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/printable.h"
#include "core/threads.h"
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
    // A flag given twice takes its last value (scripts append their own to defaults); subcommands
    // inherit this.
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    bool help_env = false, version = false;
    app.add_flag("--help-env", help_env, "list the environment variables deltallm reads");
    app.add_flag("--version", version, "print the version");
    // Global flags, accepted before or after the subcommand (subcommands fall through to them).
    bool verbose = false;
    int threads = 0;
    app.add_flag("-v,--verbose", verbose, "log what the engine decides (device, timings, ...)");
    app.add_option("-t,--threads", threads, "CPU threads (0: DELTALLM_THREADS, else one per core)");

    std::map<CLI::App*, tools::Run> runs;
    for (auto& t : tools::registry()) {
        CLI::App* sub = app.add_subcommand(t.name, t.help);
        sub->fallthrough();
        runs[sub] = t.setup(*sub);
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        // A bad flag is bad input like any other: one line and exit code 1.
        std::fprintf(stderr, "error: %s (see deltallm --help)\n", e.what());
        return 1;
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
        if (threads < 0 || threads > ThreadPool::kMaxThreads)
            fail("-t must be 0 (automatic) or a number of threads up to {}, not {}",
                 ThreadPool::kMaxThreads, threads);
        if (verbose) log::set_level(log::Level::debug);
        if (threads > 0) ThreadPool::set_global_threads(threads);
        for (auto& [sub, run] : runs)
            if (sub->parsed()) return run();
        std::fputs(app.help().c_str(), stdout);
        return 0;
    } catch (const Error& e) {
        // Messages quote names from files: their control characters are escaped.
        std::fprintf(stderr, "error: %s\n", printable(e.what()).c_str());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "error: out of memory\n");
        return 1;
    } catch (const std::exception& e) {
        // Any other failure is still one line and exit code 1, never an abort.
        std::fprintf(stderr, "error: %s\n", printable(e.what()).c_str());
        return 1;
    } catch (...) {
        std::fprintf(stderr, "error: an unexpected failure\n");
        return 1;
    }
}
