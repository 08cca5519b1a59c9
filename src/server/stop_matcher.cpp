// The stop-string matcher (see stop_matcher.h).
#include "server/stop_matcher.h"

#include <algorithm>

namespace dl::server {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
    for (std::string& s : stops)
        if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopMatcher::push(std::string_view text) {
    if (stopped_) return {};
    held_.append(text);
    size_t first = std::string::npos;
    for (const std::string& s : stops_) {
        const size_t at = held_.find(s);
        if (at < first) {
            first = at;
            matched_ = s;
        }
    }
    if (first != std::string::npos) {
        stopped_ = true;
        std::string out = held_.substr(0, first);
        held_.clear();
        return out;
    }
    // Keep the longest tail of the text that is the beginning of some stop string.
    size_t keep = 0;
    for (const std::string& s : stops_) {
        const size_t most = std::min(s.size() - 1, held_.size());
        for (size_t n = most; n > keep; --n)
            if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
                keep = n;
                break;
            }
    }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopMatcher::flush() {
    std::string out;
    if (!stopped_) out.swap(held_);
    held_.clear();
    return out;
}

}  // namespace dl::server
