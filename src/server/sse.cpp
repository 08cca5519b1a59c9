// Server-sent event framing.
#include "server/sse.h"

#include "server/api_error.h"

namespace dl::server {

std::string sse_event(const nlohmann::ordered_json& data) {
    // dump() never writes a raw newline (it escapes them inside strings), so one data line holds
    // the whole event.
    return "data: " + dump(data) + "\n\n";
}

std::string sse_done() {
    return "data: [DONE]\n\n";
}

std::vector<std::string> sse_parse(std::string_view stream) {
    std::vector<std::string> events;
    std::string data;
    bool have = false;
    size_t pos = 0;
    while (pos <= stream.size()) {
        size_t eol = stream.find('\n', pos);
        const bool last = eol == std::string_view::npos;
        std::string_view line = stream.substr(pos, last ? std::string_view::npos : eol - pos);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) {
            if (have) events.push_back(data);
            data.clear();
            have = false;
        } else if (line.substr(0, 5) == "data:") {
            std::string_view v = line.substr(5);
            if (!v.empty() && v.front() == ' ') v.remove_prefix(1);
            if (have) data += '\n';
            data += v;
            have = true;
        }
        if (last) break;
        pos = eol + 1;
    }
    return events;  // an unterminated last event is incomplete and left out
}

}  // namespace dl::server
