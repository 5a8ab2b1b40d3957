#include "api_error.h"

#include <nlohmann/json.hpp>

namespace ree::server {

ApiError badRequest(const std::string& param, const std::string& message) {
  ApiError error;
  error.param = param;
  error.message = message;
  return error;
}

std::string errorBody(const ApiError& error) {
  auto nullable = [](const std::string& text) {
    return text.empty() ? nlohmann::json(nullptr) : nlohmann::json(text);
  };
  nlohmann::json body = {{"error",
                          {{"message", error.message},
                           {"type", error.type},
                           {"param", nullable(error.param)},
                           {"code", nullable(error.code)}}}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError clientClosedError() {
  ApiError error;
  error.http_status = 499;
  error.code = "client_closed_request";
  error.message = "the client closed the connection";
  return error;
}

ApiError errorForStatus(int http_status) {
  ApiError error;
  error.http_status = http_status;
  switch (http_status) {
    case 404:
      error.message = "no such endpoint (see GET /v1/models; docs/serving.md lists the endpoints)";
      error.code = "not_found";
      break;
    case 405:
      error.message = "method not allowed on this endpoint";
      error.code = "method_not_allowed";
      break;
    case 413:
      error.message = "the request body is larger than the server's limit (--max-body-bytes)";
      error.code = "body_too_large";
      break;
    case 414:
      error.message = "the request URI is too long";
      break;
    default:
      error.message = http_status >= 500 ? "internal server error" : "malformed HTTP request";
      error.type = http_status >= 500 ? "server_error" : "invalid_request_error";
  }
  return error;
}

std::string clientMessage(const std::string& message) {
  size_t open = message.rfind(" (");
  if (open == std::string::npos || message.empty() || message.back() != ']') return message;
  size_t colon = message.find(':', open);
  size_t close = message.find(") [", open);
  if (colon == std::string::npos || close == std::string::npos || colon > close) return message;
  return message.substr(0, open);
}

}  // namespace ree::server
