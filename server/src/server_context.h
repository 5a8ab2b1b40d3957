// What the HTTP handlers share: the options, the engine's scheduler, the receipt store, metrics.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "chat_request.h"
#include "completion_request.h"
#include "metrics.h"
#include "receipt_store.h"
#include "ree/server/server.h"
#include "scheduler.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace ree::server {

struct ServerContext {
  const ServerOptions& options;
  Scheduler& scheduler;
  ReceiptStore& store;
  Metrics& metrics;
  const Engine& engine;  // read only for /metrics (thread-safe accessors)
  RequestLimits limits;  // model name, vocabulary
  const ChatPrompter& chat;
  int64_t max_context = 0;
  int64_t started = 0;  // Unix time, for /v1/models
  std::atomic<bool> draining{false};
};

// Installs every endpoint (docs/serving.md) and the JSON error handlers on `http`.
void installRoutes(httplib::Server& http, ServerContext& context);

// POST /v1/completions, or /v1/chat/completions with `chat` (completion_handler.cpp).
void handleCompletion(ServerContext& context, const httplib::Request& request,
                      httplib::Response& response, bool chat);

// Answers `error` as JSON with its status code, and counts it for `endpoint`.
void sendError(ServerContext& context, const std::string& endpoint, const ApiError& error,
               httplib::Response& response);

}  // namespace ree::server
