// The endpoints besides completions: models, health, metrics, receipts, the API key check and the
// JSON bodies of errors the HTTP layer raises itself.
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server_context.h"

namespace ree::server {
namespace {

// Constant time in the key's length: the comparison does not tell how much of a guess was right.
bool sameSecret(const std::string& given, const std::string& expected) {
  unsigned char differ = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    differ |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  }
  return differ == 0;
}

// With --api-key, /v1/* need "Authorization: Bearer <key>". Answers 401 and returns false if not.
bool authorized(ServerContext& context, const std::string& endpoint,
                const httplib::Request& request, httplib::Response& response) {
  if (context.options.api_key.empty()) return true;
  const std::string header = request.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (header.compare(0, prefix.size(), prefix) == 0 &&
      sameSecret(header.substr(prefix.size()), context.options.api_key)) {
    return true;
  }
  ApiError error;
  error.http_status = 401;
  error.message = "missing or wrong API key (send the header Authorization: Bearer <key>)";
  error.code = "invalid_api_key";
  sendError(context, endpoint, error, response);
  return false;
}

void handleModels(ServerContext& context, httplib::Response& response) {
  nlohmann::json model = {{"id", context.limits.model_name},
                          {"object", "model"},
                          {"created", context.started},
                          {"owned_by", "ree"},
                          {"max_model_len", context.max_context}};
  nlohmann::json body = {{"object", "list"}, {"data", nlohmann::json::array({model})}};
  response.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                       "application/json");
  context.metrics.countResponse("models", 200);
}

void handleReceipt(ServerContext& context, const httplib::Request& request,
                   httplib::Response& response) {
  const std::string id = request.matches[1];
  std::string text;
  if (!isReceiptId(id) || context.store.read(id, &text) != Status::kSuccess) {
    ApiError error;
    error.http_status = 404;
    error.message = "no receipt with this id";
    error.param = "id";
    error.code = "receipt_not_found";
    return sendError(context, "receipts", error, response);
  }
  response.set_content(text, "application/json");
  context.metrics.countResponse("receipts", 200);
}

void installErrorHandlers(httplib::Server& http, ServerContext& context) {
  http.set_error_handler([&context](const httplib::Request&, httplib::Response& response) {
    if (!response.body.empty()) return;  // a handler's own JSON error
    ApiError error = errorForStatus(response.status);
    response.set_content(errorBody(error), "application/json");
    context.metrics.countResponse("other", response.status);
  });
  http.set_exception_handler(
      [&context](const httplib::Request&, httplib::Response& response, std::exception_ptr) {
        ApiError error = errorForStatus(500);
        sendError(context, "other", error, response);
      });
}

}  // namespace

void sendError(ServerContext& context, const std::string& endpoint, const ApiError& error,
               httplib::Response& response) {
  response.status = error.http_status;
  response.set_content(errorBody(error), "application/json");
  context.metrics.countResponse(endpoint, error.http_status);
}

void installRoutes(httplib::Server& http, ServerContext& context) {
  http.Post("/v1/completions", [&context](const httplib::Request& req, httplib::Response& res) {
    if (authorized(context, "completions", req, res)) handleCompletion(context, req, res, false);
  });
  http.Post("/v1/chat/completions",
            [&context](const httplib::Request& req, httplib::Response& res) {
              if (authorized(context, "chat", req, res)) handleCompletion(context, req, res, true);
            });
  http.Get("/v1/models", [&context](const httplib::Request& req, httplib::Response& res) {
    if (authorized(context, "models", req, res)) handleModels(context, res);
  });
  http.Get(R"(/v1/receipts/([^/]+))",
           [&context](const httplib::Request& req, httplib::Response& res) {
             if (authorized(context, "receipts", req, res)) handleReceipt(context, req, res);
           });
  http.Get("/health", [&context](const httplib::Request&, httplib::Response& res) {
    res.status = context.draining ? 503 : 200;
    res.set_content(context.draining ? R"({"status":"draining"})" : R"({"status":"ok"})",
                    "application/json");
  });
  http.Get("/metrics", [&context](const httplib::Request&, httplib::Response& res) {
    KvPoolGauges kv;
    kv.blocks = context.engine.kvCacheBlocks();
    kv.used = context.engine.kvCacheBlocksUsed();
    kv.block_size = context.engine.kvCacheBlockSize();
    res.set_content(context.metrics.render(kv), "text/plain; version=0.0.4");
  });
  installErrorHandlers(http, context);
}

}  // namespace ree::server
