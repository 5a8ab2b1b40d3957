// ree::server: the OpenAI-compatible HTTP server behind `ree-launch serve` (docs/serving.md).
// One Engine serves every request: a scheduler thread takes the queued requests and runs them
// through Engine::generate in batches; each finished request gets a receipt (docs/receipt.md) kept
// on disk under receipt_dir, named in the response and served at GET /v1/receipts/{id}.
//
//   ree::server::ServerOptions options;
//   options.engine.model = "builtin:tiny-llama";
//   options.port = 8000;
//   ree::Status status = ree::server::runServer(options);  // returns after SIGTERM/SIGINT
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ree/core/status.h"
#include "ree/models/engine.h"

namespace ree::server {

struct ServerOptions {
  EngineOptions engine;  // the model and how it runs (max_batch: requests per engine batch)
  std::string host = "127.0.0.1";
  int port = 8000;                // 0: any free port (printed on the "listening" line)
  std::string api_key;            // empty: no authentication; else /v1/* need "Bearer <key>"
  std::string receipt_dir;        // empty: defaultReceiptDir()
  std::string served_model_name;  // the "model" clients name (empty: engine.model)
  size_t max_body_bytes = size_t{1} << 20;
  size_t max_queue = 1024;  // requests waiting for the engine; more get 429
  int http_threads = 64;    // connections served at once (each streaming client holds one)
};

// $REE_CACHE_DIR/receipts, else $XDG_CACHE_HOME/ree/receipts, else $HOME/.cache/ree/receipts.
std::string defaultReceiptDir();

// Loads the model, binds host:port, prints "ree-launch serve: listening on http://HOST:PORT" on
// stdout, and serves until SIGTERM or SIGINT; then refuses new requests, finishes the queued and
// running ones (their streams included) and returns kSuccess. Fails (message naming the flag)
// when the model cannot be loaded, the receipt directory cannot be made or the address is taken.
Status runServer(const ServerOptions& options);

}  // namespace ree::server
