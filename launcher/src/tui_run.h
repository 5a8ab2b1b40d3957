// A generation run on a worker thread: Engine::create, Engine::generate with a TokenCallback that
// collects the streamed text, then the receipt, exactly as `ree-launch run` does. The UI thread
// reads a snapshot whenever it draws; it never waits for the engine. cancel() stops the run
// between two tokens: the callback throws a private exception that generate() passes back up
// (it unwinds like an error return at that point), and the engine is then destroyed, not reused.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli.h"
#include "ree/models/engine.h"

namespace ree::launcher::tui {

enum class RunPhase { kIdle, kLoading, kGenerating, kWritingReceipt, kDone, kFailed, kCancelled };

struct RequestProgress {
  std::string text;    // streamed so far
  int64_t tokens = 0;  // produced so far
  int64_t max_new_tokens = 0;
  std::string finish_reason;      // when done
  std::string output_ids_sha256;  // when done
};

struct StageInfo {
  int64_t first_layer = 0, end_layer = 0;
  int64_t parameter_bytes = 0;
  std::string device;
};

struct RunSnapshot {
  RunPhase phase = RunPhase::kIdle;
  std::string model;
  std::string command_line;  // the equivalent ree-launch command
  std::vector<RequestProgress> requests;
  std::vector<StageInfo> stages;
  int64_t tokens = 0;  // all requests
  double load_seconds = 0;
  double generate_seconds = 0;  // so far, or in all when done
  std::string message;          // the error, the receipt written, or how the run was cancelled
};

class RunWorker {
 public:
  RunWorker() = default;
  ~RunWorker();  // cancels and joins

  // Starts a run (the previous one must be over: busy() false).
  void start(const LaunchOptions& options, const std::string& command_line);
  bool busy() const { return busy_.load(); }
  void cancel() { cancel_requested_ = true; }
  // Waits for the worker to end (after cancel() it ends at the next token, or after loading).
  void join();
  RunSnapshot snapshot() const;

 private:
  void work(LaunchOptions options);
  void generateAndReport(Engine& engine, const LaunchOptions& options);
  void finish(RunPhase phase, const std::string& message);

  mutable std::mutex mutex_;
  RunSnapshot state_;
  std::chrono::steady_clock::time_point generate_start_;
  std::atomic<bool> busy_{false};
  std::atomic<bool> cancel_requested_{false};
  std::thread thread_;
};

const char* runPhaseName(RunPhase phase);

}  // namespace ree::launcher::tui
