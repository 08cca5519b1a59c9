// Request bodies and their shared fields (see request.h).
#include "server/request.h"

#include <cmath>
#include <limits>

#include "core/printable.h"
#include "server/api_error.h"

namespace dl::server {

namespace {

using Json = nlohmann::ordered_json;

struct TooDeep {};
struct TooManyKeys {
    bool one_object;
};

const Json* field(const Json& body, const char* key) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

double get_number(const Json& body, const char* key, double fallback, double lo, double hi) {
    const Json* v = field(body, key);
    if (!v) return fallback;
    if (!v->is_number()) bad_request("'{}' must be a number", key);
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi)
        bad_request("'{}' must be between {} and {}, not {}", key, lo, hi, x);
    return x;
}

// An integer, or a number with no fractional part (JSON clients send 5.0 for 5).
bool get_int(const Json& body, const char* key, int64_t& out) {
    const Json* v = field(body, key);
    if (!v) return false;
    if (v->is_number_integer()) {
        if (v->is_number_unsigned() && v->get<uint64_t>() > (uint64_t)INT64_MAX)
            bad_request("'{}' is too large", key);
        out = v->get<int64_t>();
        return true;
    }
    if (v->is_number_float()) {
        const double x = v->get<double>();
        if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 9e15) {
            out = (int64_t)x;
            return true;
        }
    }
    bad_request("'{}' must be an integer", key);
}

int64_t get_int_in(const Json& body, const char* key, int64_t fallback, int64_t lo, int64_t hi) {
    int64_t x = fallback;
    if (!get_int(body, key, x)) return fallback;
    if (x < lo || x > hi) bad_request("'{}' must be between {} and {}, not {}", key, lo, hi, x);
    return x;
}

}  // namespace

Json parse_body(std::string_view body) {
    // The parser would take a NUL byte for the end of the text and ignore what follows; JSON
    // never holds one (a string escapes it).
    if (size_t at = body.find('\0'); at != std::string_view::npos)
        bad_request("the request body is not valid JSON: a NUL byte at offset {}", at);
    Json j;
    try {
        // The parser itself is iterative; the callback refuses deep nesting before anything
        // recursive (a template, a dump) walks the value, and objects of more keys than their
        // ordered insertion can take in quickly.
        std::vector<size_t> keys;  // of each object open now, innermost last
        size_t all_keys = 0;
        Json::parser_callback_t check = [&](int depth, Json::parse_event_t ev, Json&) {
            if (depth > kMaxJsonDepth) throw TooDeep{};
            using E = Json::parse_event_t;
            if (ev == E::object_start) keys.push_back(0);
            if (ev == E::object_end && !keys.empty()) keys.pop_back();
            if (ev == E::key) {
                if (!keys.empty() && ++keys.back() > kMaxObjectKeys) throw TooManyKeys{true};
                if (++all_keys > kMaxBodyKeys) throw TooManyKeys{false};
            }
            return true;
        };
        j = Json::parse(body.begin(), body.end(), check);
    } catch (const TooDeep&) {
        bad_request("the request body nests JSON deeper than {} levels", kMaxJsonDepth);
    } catch (const TooManyKeys& e) {
        if (e.one_object)
            bad_request("an object in the request body has more than {} keys", kMaxObjectKeys);
        bad_request("the request body has more than {} keys in all", kMaxBodyKeys);
    } catch (const nlohmann::json::exception& e) {
        // e.what() names the byte and what was expected; drop nlohmann's bracketed prefix.
        std::string why = e.what();
        if (auto p = why.find("] "); p != std::string::npos) why = why.substr(p + 2);
        bad_request("the request body is not valid JSON: {}", why);
    }
    if (!j.is_object()) bad_request("the request body must be a JSON object");
    return j;
}

int32_t token_id(const Json& x, int64_t n_vocab, std::string_view where) {
    const bool huge = x.is_number_unsigned() && x.get<uint64_t>() >= (uint64_t)n_vocab;
    const int64_t id = huge ? -1 : x.get<int64_t>();
    if (id < 0 || id >= n_vocab)
        bad_request("token id {}{}{} is outside the vocabulary of {}", x.dump(),
                    where.empty() ? "" : " ", where, n_vocab);
    return (int32_t)id;
}

bool get_bool(const Json& body, const char* key, bool fallback) {
    const Json* v = field(body, key);
    if (!v) return fallback;
    if (!v->is_boolean()) bad_request("'{}' must be true or false", key);
    return v->get<bool>();
}

std::string get_string(const Json& body, const char* key, const std::string& fallback) {
    const Json* v = field(body, key);
    if (!v) return fallback;
    if (!v->is_string()) bad_request("'{}' must be a string", key);
    return v->get<std::string>();
}

CompletionParams parse_completion_params(const Json& body, bool chat, int64_t n_ctx,
                                         int64_t n_vocab, uint64_t random_seed) {
    CompletionParams p;
    p.model = get_string(body, "model", "");
    p.stream = get_bool(body, "stream", false);
    if (const Json* so = field(body, "stream_options")) {
        if (!so->is_object()) bad_request("'stream_options' must be an object");
        p.include_usage = get_bool(*so, "include_usage", false);
    }

    SamplerParams& s = p.sampling;
    s.temperature = (float)get_number(body, "temperature", s.temperature, 0, 100);
    s.top_p = (float)get_number(body, "top_p", s.top_p, 0, 1);
    s.min_p = (float)get_number(body, "min_p", s.min_p, 0, 1);
    s.top_k = (int32_t)get_int_in(body, "top_k", s.top_k, 0, 1 << 30);
    s.repeat_penalty = (float)get_number(body, "repeat_penalty", s.repeat_penalty, 0.01, 100);
    s.repeat_penalty = (float)get_number(body, "repetition_penalty", s.repeat_penalty, 0.01, 100);
    s.repeat_last_n = (int32_t)get_int_in(body, "repeat_last_n", s.repeat_last_n, -1, 1 << 30);
    s.presence_penalty = (float)get_number(body, "presence_penalty", 0, -2, 2);
    s.frequency_penalty = (float)get_number(body, "frequency_penalty", 0, -2, 2);
    int64_t seed = 0;
    if (get_int(body, "seed", seed))
        s.seed = (uint64_t)seed;  // a negative seed is as good as any other
    else
        s.seed = random_seed;

    // max_completion_tokens is the newer name; n_predict is llama-server's.
    const int64_t max_allowed = n_ctx;
    for (const char* key : {"n_predict", "max_tokens", "max_completion_tokens"}) {
        int64_t n = 0;
        if (!get_int(body, key, n)) continue;
        if (std::string_view(key) == "n_predict" && n == -1) continue;
        if (n < 1) bad_request("'{}' must be at least 1, not {}", key, n);
        if (n > max_allowed)
            bad_request("'{}' of {} is more than the context of {} tokens", key, n, n_ctx);
        p.max_tokens = n;
    }

    if (const Json* st = field(body, "stop")) {
        if (st->is_string()) {
            p.stop.push_back(st->get<std::string>());
        } else if (st->is_array()) {
            if (st->size() > 16) bad_request("'stop' may hold at most 16 strings");
            for (const Json& x : *st) {
                if (!x.is_string()) bad_request("'stop' must be a string or a list of strings");
                p.stop.push_back(x.get<std::string>());
            }
        } else {
            bad_request("'stop' must be a string or a list of strings");
        }
        for (const std::string& x : p.stop)
            if (x.size() > 1024) bad_request("a stop string may be at most 1024 bytes long");
    }

    if (chat) {
        const bool lp = get_bool(body, "logprobs", false);
        const int64_t top = get_int_in(body, "top_logprobs", 0, 0, 20);
        if (field(body, "top_logprobs") && !lp)
            bad_request("'top_logprobs' needs 'logprobs': true");
        if (lp) p.top_logprobs = (int32_t)top;
    } else {
        // The completions API's logprobs is the number of alternatives.
        if (const Json* v = field(body, "logprobs"); v && v->is_boolean()) {
            if (v->get<bool>()) p.top_logprobs = 0;
        } else {
            const int64_t n = get_int_in(body, "logprobs", -1, 0, 20);
            if (n >= 0) p.top_logprobs = (int32_t)n;
        }
    }

    // {"token id": bias}, as OpenAI takes it (the ids as strings: JSON's keys are).
    if (const Json* lb = field(body, "logit_bias")) {
        if (!lb->is_object()) bad_request("'logit_bias' must be an object of token ids to biases");
        for (const auto& [key, v] : lb->items()) {
            int64_t id = -1;
            const bool digits = !key.empty() && key.size() <= 10 &&
                                key.find_first_not_of("0123456789") == std::string::npos;
            if (digits) id = std::stoll(key);
            if (id < 0 || id >= n_vocab)
                bad_request("'logit_bias' names '{}', which is no token id of the vocabulary of {}",
                            printable(key), n_vocab);
            if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < -100 ||
                v.get<double>() > 100)
                bad_request("'logit_bias' of token {} must be a number from -100 to 100", id);
            p.logit_bias.emplace_back((int32_t)id, v.get<float>());
        }
    }
    // OpenAI's fields this server takes and does not need, checked for their types.
    get_bool(body, "parallel_tool_calls", true);
    get_string(body, "user", "");
    get_string(body, "reasoning_effort", "");

    if (get_int_in(body, "n", 1, 1, 1 << 30) != 1)
        bad_request("'n' must be 1: one choice per request is supported");
    if (const Json* rf = field(body, "response_format")) {
        if (!rf->is_object()) bad_request("'response_format' must be an object");
        const std::string type = get_string(*rf, "type", "text");
        if (type == "json_object") {
            p.json_object = true;
        } else if (type == "json_schema") {
            const Json* js = field(*rf, "json_schema");
            if (!js || !js->is_object() || !js->contains("schema") ||
                !((*js)["schema"].is_object() || (*js)["schema"].is_boolean()))
                bad_request(
                    "'response_format' of type 'json_schema' needs 'json_schema': {{\"name\": "
                    "..., \"schema\": {{...}}}}");
            p.json_schema = (*js)["schema"];
            p.json_object = true;
        } else if (type != "text") {
            bad_request(
                "'response_format' of type '{}' is not supported; use 'text', 'json_object' or "
                "'json_schema'",
                type);
        }
    }
    p.ignore_eos = get_bool(body, "ignore_eos", false);
    return p;
}

}  // namespace dl::server
