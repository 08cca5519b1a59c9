// Stop strings: generated text is cut before the first stop string, which may be split across
// tokens. Text that could still be the beginning of a stop string is held back, so a client never
// sees part of one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dl::server {

class StopMatcher {
  public:
    explicit StopMatcher(std::vector<std::string> stops);

    // Adds generated text; returns what may be sent now. Once a stop string is found, returns the
    // text before it and stopped() is true; later text is dropped.
    std::string push(std::string_view text);
    // The text held back at the end of generation (no stop string followed it).
    std::string flush();
    bool stopped() const { return stopped_; }
    // The stop string that matched ("" before one did).
    const std::string& matched() const { return matched_; }

  private:
    std::vector<std::string> stops_;
    std::string held_;
    bool stopped_ = false;
    std::string matched_;
};

}  // namespace dl::server
