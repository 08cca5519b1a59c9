// Reading an OpenAI request body: the JSON itself (size and nesting bounded) and the fields the
// completion routes share, each checked for its type and range. Anything wrong is an ApiError
// 400 naming the field; unknown fields are ignored, as OpenAI-compatible servers do.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "executor/sampler_params.h"

namespace dl::server {

// Deeper nesting than this is refused (templates and dumps recurse over the values).
constexpr int kMaxJsonDepth = 64;
// Keys an object of the body may have, and the body all told: the parser keeps each object's
// keys in order, so an object's keys cost the square of their number to take in.
constexpr size_t kMaxObjectKeys = 1024, kMaxBodyKeys = 131072;
// Messages a chat may hold (each is rendered and tokenized before the context is checked).
constexpr size_t kMaxMessages = 16384;

// Parses a request body that must be a JSON object; ApiError 400 otherwise.
nlohmann::ordered_json parse_body(std::string_view body);

struct CompletionParams {
    std::string model;  // as the request named it ("" when absent)
    SamplerParams sampling;
    int64_t max_tokens = -1;  // -1: until the end of generation or of the context
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    int32_t top_logprobs = -1;   // -1: no logprobs; else the alternatives per token
    bool ignore_eos = false;
    // response_format json_object or json_schema: the output is constrained to a JSON object, and
    // to the schema when there is one (null: none).
    bool json_object = false;
    nlohmann::ordered_json json_schema;
    // logit_bias: (token, bias) pairs, each bias from -100 to 100.
    std::vector<std::pair<int32_t, float>> logit_bias;
};

// The shared fields of /v1/chat/completions (chat = true) and /v1/completions. n_ctx bounds
// max_tokens; n_vocab the token ids of logit_bias; random_seed is the seed when the request has
// none.
CompletionParams parse_completion_params(const nlohmann::ordered_json& body, bool chat,
                                         int64_t n_ctx, int64_t n_vocab, uint64_t random_seed);

// Small typed readers, exported for the other routes: each returns the fallback when the field
// is absent or null and throws ApiError 400 when it has another type.
bool get_bool(const nlohmann::ordered_json& body, const char* key, bool fallback);
std::string get_string(const nlohmann::ordered_json& body, const char* key,
                       const std::string& fallback);

// An integer JSON value as a token id of a vocabulary of n_vocab; ApiError 400 otherwise, naming
// the value as sent (one past 2^63 is not wrapped) and `where` ("in 'prompt'", or empty).
int32_t token_id(const nlohmann::ordered_json& x, int64_t n_vocab, std::string_view where);

}  // namespace dl::server
