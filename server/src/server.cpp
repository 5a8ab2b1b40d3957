// runServer: loads the engine, opens the receipt store, starts the scheduler, binds, serves, and
// on SIGTERM/SIGINT drains (no new requests; queued and running ones finish) before returning.
#include "ree/server/server.h"

#include <httplib.h>
#include <pthread.h>
#include <sys/socket.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "ree/core/text.h"
#include "ree/models/model_identity.h"
#include "server_context.h"

namespace ree::server {
namespace {

Status receiptRunInfo(const ServerOptions& options, const Engine& engine, ReceiptRunInfo* run) {
  run->model = options.engine.model;
  REE_RETURN_IF_ERROR(computeModelIdentity(options.engine.model, &run->identity));
  run->options = engine.options();
  run->max_context = engine.maxContext();
  run->plan = engine.plan();
  const EngineOptions& engine_options = engine.options();
  for (size_t s = 0; s < run->plan.size(); ++s) {
    run->stage_devices.push_back((engine_options.stage_devices.size() > s
                                      ? engine_options.stage_devices[s]
                                      : engine_options.device)
                                     .str());
  }
  return Status::kSuccess;
}

// Waits for SIGTERM/SIGINT (blocked in every thread, so only this one receives them), then
// drains. `stop_only` (set before signalling this thread ourselves) skips the message.
void waitForSignal(const sigset_t& signals, ServerContext& context, httplib::Server& http,
                   const std::atomic<bool>& stop_only) {
  int signal = 0;
  sigwait(&signals, &signal);
  if (!stop_only) {
    std::fprintf(stderr, "ree-launch serve: %s: finishing the requests in flight, then exiting\n",
                 signal == SIGTERM ? "SIGTERM" : "SIGINT");
  }
  context.draining = true;
  context.scheduler.drain();
  http.stop();  // returns once every connection's handler (streams included) has finished
}

Status bindServer(const ServerOptions& options, httplib::Server& http, int* port) {
  *port = options.port;
  bool bound = options.port == 0 ? (*port = http.bind_to_any_port(options.host)) > 0
                                 : http.bind_to_port(options.host, options.port);
  if (!bound) {
    return REE_FAIL(Status::kIoError,
                    "--host %s --port %d: cannot listen there (in use, or not "
                    "an address of this machine)",
                    printableText(options.host, 80).c_str(), options.port);
  }
  return Status::kSuccess;
}

void configureHttp(const ServerOptions& options, httplib::Server& http) {
  const int threads = options.http_threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  // httplib's default sets SO_REUSEPORT, which lets a second server bind the same port and share
  // its connections; SO_REUSEADDR alone still allows a quick restart on the port.
  http.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http.set_payload_max_length(options.max_body_bytes);
  http.set_read_timeout(30, 0);
  http.set_keep_alive_timeout(5);
}

Status serveWith(const ServerOptions& options, Engine& engine, const ReceiptRunInfo& run,
                 ReceiptStore& store, const sigset_t& signals) {
  Metrics metrics;
  Scheduler scheduler(engine, run, store, metrics, options.max_queue);
  RequestLimits limits;
  limits.model_name =
      options.served_model_name.empty() ? options.engine.model : options.served_model_name;
  limits.vocab_size = engine.config().vocab_size;
  ChatPrompter chat;
  chat.load(engine.modelDirectory());
  ServerContext context{options,
                        scheduler,
                        store,
                        metrics,
                        engine,
                        limits,
                        chat,
                        engine.maxContext(),
                        static_cast<int64_t>(std::time(nullptr))};
  httplib::Server http;
  configureHttp(options, http);
  installRoutes(http, context);
  int port = 0;
  REE_RETURN_IF_ERROR(bindServer(options, http, &port));
  scheduler.start();
  std::atomic<bool> stop_only{false};
  std::thread watcher([&] { waitForSignal(signals, context, http, stop_only); });
  std::printf("ree-launch serve: listening on http://%s:%d (model %s, receipts in %s)\n",
              options.host.c_str(), port, limits.model_name.c_str(), store.dir().c_str());
  std::fflush(stdout);
  bool listened = http.listen_after_bind();
  if (watcher.joinable() && !context.draining) {
    stop_only = true;
    pthread_kill(watcher.native_handle(), SIGTERM);
  }
  watcher.join();
  if (!listened && !context.draining) {
    return REE_FAIL(Status::kIoError, "the server stopped listening on %s:%d", options.host.c_str(),
                    port);
  }
  return Status::kSuccess;
}

}  // namespace

std::string defaultReceiptDir() {
  if (const char* dir = std::getenv("REE_CACHE_DIR")) return std::string(dir) + "/receipts";
  if (const char* xdg = std::getenv("XDG_CACHE_HOME")) return std::string(xdg) + "/ree/receipts";
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/ree/receipts";
}

static Status loadAndServe(const ServerOptions& options, const sigset_t& signals) {
  ReceiptStore store;
  REE_RETURN_IF_ERROR(
      store.open(options.receipt_dir.empty() ? defaultReceiptDir() : options.receipt_dir));
  std::unique_ptr<Engine> engine;
  REE_RETURN_IF_ERROR(Engine::create(options.engine, &engine));
  ReceiptRunInfo run;
  REE_RETURN_IF_ERROR(receiptRunInfo(options, *engine, &run));
  Status status = serveWith(options, *engine, run, store, signals);
  Status shut = engine->shutdown();
  return status != Status::kSuccess ? status : shut;
}

Status runServer(const ServerOptions& options) {
  std::signal(SIGPIPE, SIG_IGN);  // a client that goes away must not end the server
  // Blocked before any thread starts (the engine's CPU workers too), so that only the watcher
  // thread receives SIGTERM/SIGINT.
  sigset_t signals, previous;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, &previous);
  Status status = loadAndServe(options, signals);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return status;
}

}  // namespace ree::server
