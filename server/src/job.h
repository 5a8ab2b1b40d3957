// One completion request on its way through the server: the HTTP handler creates it and waits on
// it; the scheduler fills it (tokens as they are produced, then the result and its receipt).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api_error.h"
#include "completion_request.h"
#include "ree/models/engine.h"

namespace ree::server {

struct TokenEvent {
  int choice = 0;  // which of the request's n sequences
  int32_t token = 0;
  std::string text;  // the text that became complete with this token (may be empty)
  // With CompletionRequest::top_logprobs >= 0: the token's log-probabilities.
  std::optional<TokenLogprobs> logprobs;
};

struct Job {
  CompletionRequest request;
  std::string id;  // the completion's and its receipt's id ("cmpl-" + 32 hex digits)
  std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now();
  // One stop flag per choice (GenerationRequest::stop), made before the job is queued: the
  // scheduler sets a choice's at its stop string, the HTTP handler all of them when the client
  // goes away; the engine then ends the choice after the token it is producing.
  std::vector<std::shared_ptr<std::atomic<bool>>> stops;
  std::atomic<bool> client_gone{false};

  void makeStops() {
    stops.clear();
    for (int c = 0; c < request.n; ++c)
      stops.push_back(std::make_shared<std::atomic<bool>>(false));
  }
  // The client closed its connection: nobody reads the answer, so the engine stops the job's
  // choices and frees their KV cache blocks at once.
  void clientGone() {
    client_gone = true;
    for (const std::shared_ptr<std::atomic<bool>>& stop : stops)
      stop->store(true);
  }

  std::mutex mutex;
  std::condition_variable changed;
  // Guarded by `mutex`: filled by the scheduler.
  std::deque<TokenEvent> tokens;  // produced and not yet taken by a streaming handler
  bool started = false;           // passed the scheduler's checks and entered an engine batch
  bool done = false;
  bool failed = false;
  ApiError error;                         // when failed
  std::vector<GenerationResult> results;  // one per choice (request.n)
  std::string receipt_sha256;

  void markStarted() {
    std::lock_guard<std::mutex> lock(mutex);
    started = true;
    changed.notify_all();
  }
  void pushToken(int choice, int32_t token, const std::string& text,
                 std::optional<TokenLogprobs> logprobs = std::nullopt) {
    std::lock_guard<std::mutex> lock(mutex);
    tokens.push_back({choice, token, text, std::move(logprobs)});
    changed.notify_all();
  }
  void finish(std::vector<GenerationResult> finished, std::string sha256) {
    std::lock_guard<std::mutex> lock(mutex);
    results = std::move(finished);
    receipt_sha256 = std::move(sha256);
    done = true;
    changed.notify_all();
  }
  void fail(ApiError why) {
    std::lock_guard<std::mutex> lock(mutex);
    error = std::move(why);
    failed = true;
    done = true;
    changed.notify_all();
  }
};

}  // namespace ree::server
