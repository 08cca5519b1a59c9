// Errors as the OpenAI API sends them: an HTTP status and a body
// {"error": {"message", "type", "code"}}. Request handling throws ApiError; the server turns it
// (and dl::Error from the layers below, a client error) into that response.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "core/error.h"

namespace dl::server {

class ApiError : public Error {
  public:
    ApiError(int status, const std::string& message, std::string type = {});
    int status() const { return status_; }
    const std::string& type() const { return type_; }

  private:
    int status_;
    std::string type_;
};

// throw ApiError(400, ...) with a formatted message.
template <typename... Args>
[[noreturn]] void bad_request(fmt::format_string<Args...> f, Args&&... args) {
    throw ApiError(400, fmt::format(f, std::forward<Args>(args)...));
}

// OpenAI's error type for a status: invalid_request_error (400, 404, 413), authentication_error
// (401), unavailable_error (503), server_error (500 and anything else).
const char* error_type(int status);

// {"error": {"message": ..., "type": ..., "code": status}}
nlohmann::json error_body(int status, std::string_view message, std::string_view type = {});

// JSON text with invalid UTF-8 replaced (token pieces may hold part of a character).
std::string dump(const nlohmann::json& j);
std::string dump(const nlohmann::ordered_json& j);

}  // namespace dl::server
