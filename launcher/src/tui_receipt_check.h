// `validate` and `verify` of one receipt on a worker thread, through the same library calls as
// ree-launch's subcommands (readReceipt, validateReceipt, computeModelIdentity,
// checkModelIdentity, receiptEngineOptions, Engine::create, verifyReceipt). The result keeps
// where a divergence was found (request, step, layer, stage), as `ree-launch verify` reports it.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "ree/models/engine.h"
#include "ree/models/receipt.h"

namespace ree::launcher::tui {

struct ReceiptCheckResult {
  bool running = false;
  bool done = false;
  std::string path;
  std::string action;   // "validate" or "verify"
  std::string verdict;  // validate: valid / invalid / malformed; verify: verdictName()
  bool good = false;    // valid or verified
  std::string summary;  // the line ree-launch prints
  std::string note;
  std::string field;
  int64_t request = -1, step = -1, layer = -1, stage = -1;
  int64_t steps_checked = 0;
  double seconds = 0;
};

class ReceiptChecker {
 public:
  ~ReceiptChecker() { join(); }
  bool busy() const { return busy_.load(); }
  void validate(const std::string& path);
  // `options` carries the model, device and pipeline layout (any layout verifies); the rest
  // comes from the receipt.
  void verify(const std::string& path, const EngineOptions& options);
  void join();
  ReceiptCheckResult result() const;

 private:
  void begin(const std::string& path, const char* action);
  // Runs `job` on the worker thread and publishes what it returns.
  void launch(const std::string& path, const char* action, std::function<ReceiptCheckResult()> job);
  void publish(const ReceiptCheckResult& result);

  mutable std::mutex mutex_;
  ReceiptCheckResult result_;
  std::atomic<bool> busy_{false};
  std::thread thread_;
};

}  // namespace ree::launcher::tui
