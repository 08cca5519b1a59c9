// The rule a request puts on what the model may write, if any: a JSON object (response_format
// json_object, or json_schema with its schema) or a forced tool call's opening (tool_choice
// "required" or a named function). Built per request over the vocabulary's table, which the
// server makes once.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/chat_output.h"
#include "engine/token_constraint.h"
#include "engine/token_table.h"
#include "server/request.h"

namespace dl::server {

// openings: a forced call's openings (ChatBridge::tool_call_openings); format: how the model
// writes (its thinking block); table: the vocabulary's table, asked for only when a rule is
// needed. Null when the request sets no rule; ApiError 400 for a schema the rule cannot enforce
// or for both rules at once.
std::shared_ptr<TokenConstraint> output_constraint(
    const CompletionParams& p, const ChatOutputFormat& format,
    const std::vector<std::string>& openings,
    const std::function<std::shared_ptr<const TokenTable>()>& table);

}  // namespace dl::server
