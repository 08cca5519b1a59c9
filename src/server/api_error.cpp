// OpenAI-shaped error bodies.
#include "server/api_error.h"

namespace dl::server {

ApiError::ApiError(int status, const std::string& message, std::string type)
    : Error(message), status_(status), type_(type.empty() ? error_type(status) : std::move(type)) {}

const char* error_type(int status) {
    switch (status) {
        case 400:
        case 404:
        case 413:
            return "invalid_request_error";
        case 401:
            return "authentication_error";
        case 503:
            return "unavailable_error";
        default:
            return status >= 400 && status < 500 ? "invalid_request_error" : "server_error";
    }
}

nlohmann::json error_body(int status, std::string_view message, std::string_view type) {
    nlohmann::json e;
    e["message"] = std::string(message);
    e["type"] = type.empty() ? std::string(error_type(status)) : std::string(type);
    e["code"] = status;
    return nlohmann::json{{"error", e}};
}

std::string dump(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string dump(const nlohmann::ordered_json& j) {
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace dl::server
