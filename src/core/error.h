// Errors: one exception type for "this input or request cannot be served", carrying a sentence
// meant for the user. Front-ends catch it and turn it into a message and a non-zero exit (or an
// HTTP 4xx). Programming errors use DL_ASSERT, which is never the answer to bad input.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace dl {

class Error : public std::runtime_error {
  public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// throw dl::Error with a formatted message: fail("tensor {} has {} dims", name, n)
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
    throw Error(fmt::format(f, std::forward<Args>(args)...));
}

[[noreturn]] void assert_failed(const char* expr, const char* file, int line);

}  // namespace dl

#define DL_ASSERT(x)                                           \
    do {                                                       \
        if (!(x)) ::dl::assert_failed(#x, __FILE__, __LINE__); \
    } while (0)
