// Server-sent events as OpenAI streams them: each event one line "data: <json>" and a blank line,
// the stream closed by "data: [DONE]".
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace dl::server {

std::string sse_event(const nlohmann::ordered_json& data);
std::string sse_done();

// The data payloads of a stream of events (for tests and clients): "data:" lines, one event per
// blank-line-separated block, multi-line data joined with "\n". Comments and other fields are
// skipped.
std::vector<std::string> sse_parse(std::string_view stream);

}  // namespace dl::server
