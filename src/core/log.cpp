// Logging and the assertion handler.
#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "core/env.h"
#include "core/error.h"

namespace dl {

namespace log {
namespace {
std::atomic<int> g_level{-1};
std::mutex g_mutex;

Level initial_level() {
    std::string s = env::get_string("DELTALLM_LOG");
    if (s == "debug") return Level::debug;
    if (s == "warn") return Level::warn;
    if (s == "error") return Level::error;
    if (s == "quiet") return Level::quiet;
    return Level::info;
}
}  // namespace

void set_level(Level l) {
    g_level = static_cast<int>(l);
}

Level level() {
    int l = g_level.load(std::memory_order_relaxed);
    if (l < 0) {
        l = static_cast<int>(initial_level());
        g_level = l;
    }
    return static_cast<Level>(l);
}

void write(Level l, const std::string& msg) {
    static const char* names[] = {"debug", "info", "warning", "error", ""};
    std::lock_guard<std::mutex> lock(g_mutex);
    if (l == Level::info)
        std::fprintf(stderr, "%s\n", msg.c_str());
    else
        std::fprintf(stderr, "%s: %s\n", names[static_cast<int>(l)], msg.c_str());
}
}  // namespace log

void assert_failed(const char* expr, const char* file, int line) {
    std::fprintf(stderr, "internal error: %s (%s:%d)\n", expr, file, line);
    std::abort();
}

}  // namespace dl
