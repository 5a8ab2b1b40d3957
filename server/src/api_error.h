// The OpenAI error shape every 4xx/5xx answer carries:
// {"error": {"message": ..., "type": ..., "param": ... or null, "code": ... or null}}.
#pragma once

#include <string>

namespace ree::server {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the request field at fault; empty: null
  std::string code;   // a stable machine-readable name; empty: null
};

ApiError badRequest(const std::string& param, const std::string& message);

// 499 (nginx's "client closed request"): the answer of a request whose client went away, which
// nobody reads; it ends the handler's wait and is counted under this status.
ApiError clientClosedError();

// The JSON body of `error` (one line).
std::string errorBody(const ApiError& error);

// The error a bare HTTP status stands for, when the HTTP layer answered before any handler
// (unknown path, body over the limit, malformed request line).
ApiError errorForStatus(int http_status);

// lastErrorMessage() without its "(file.cpp:line) [status]" tail: what a client needs to read.
std::string clientMessage(const std::string& message);

}  // namespace ree::server
