// A decline is a value, not an exception: the Vulkan driver answers "cannot serve this" with a
// sentence the engine logs (and `deltallm info` prints) before falling back to the CPU chain.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace dl::vk {

struct Decline {
    std::string reason;  // one sentence, e.g. "layer 7: ssm_out in IQ2_XS has no device kernel"
};

// Either a value or a Decline.
template <typename T>
class Result {
  public:
    Result(T value) : value_(std::move(value)) {}
    Result(Decline d) : decline_(std::move(d)) {}

    bool ok() const { return value_.has_value(); }
    explicit operator bool() const { return ok(); }
    T& value() { return *value_; }
    const T& value() const { return *value_; }
    T& operator*() { return *value_; }
    T* operator->() { return &*value_; }
    const std::string& reason() const { return decline_.reason; }
    const Decline& decline() const { return decline_; }

  private:
    std::optional<T> value_;
    Decline decline_;
};

}  // namespace dl::vk
