#include "server/output_constraint.h"

#include "core/error.h"
#include "engine/json_constraint.h"
#include "engine/logit_bias.h"
#include "engine/prefix_constraint.h"
#include "server/api_error.h"

namespace dl::server {

namespace {

std::shared_ptr<TokenConstraint> shape_constraint(
    const CompletionParams& p, const ChatOutputFormat& format,
    const std::vector<std::string>& openings,
    const std::function<std::shared_ptr<const TokenTable>()>& table) {
    if (p.json_object && !openings.empty())
        bad_request("'response_format' json_object and a forced 'tool_choice' exclude each other");
    const ThinkBlock think = format.think_block();
    if (!openings.empty()) return std::make_shared<PrefixConstraint>(table(), think, openings);
    if (!p.json_object) return nullptr;
    std::shared_ptr<const JsonSchema> schema;
    if (!p.json_schema.is_null()) {
        try {
            schema = JsonSchema::compile(nlohmann::json::parse(p.json_schema.dump()));
        } catch (const Error& e) {
            bad_request("'response_format': {}", e.what());
        }
    }
    return std::make_shared<JsonConstraint>(table(), think, schema);
}

}  // namespace

std::shared_ptr<TokenConstraint> output_constraint(
    const CompletionParams& p, const ChatOutputFormat& format,
    const std::vector<std::string>& openings,
    const std::function<std::shared_ptr<const TokenTable>()>& table) {
    std::shared_ptr<TokenConstraint> shape = shape_constraint(p, format, openings, table);
    if (p.logit_bias.empty()) return shape;
    return std::make_shared<LogitBias>(p.logit_bias, std::move(shape));
}

}  // namespace dl::server
