#include "tui_receipt_check.h"

#include <chrono>
#include <functional>
#include <memory>

#include "ree/models/model_identity.h"

namespace ree::launcher::tui {
namespace {

ReceiptCheckResult validated(const std::string& path) {
  ReceiptCheckResult out;
  Receipt receipt;
  std::string summary;
  if (readReceipt(path, &receipt) != Status::kSuccess) {
    out.verdict = "malformed";
    out.summary = lastErrorMessage();
    return out;
  }
  Status status = validateReceipt(receipt, &summary);
  out.verdict = status == Status::kSuccess    ? "valid"
                : status == Status::kMismatch ? "invalid"
                                              : "malformed";
  out.good = status == Status::kSuccess;
  out.summary = out.good ? summary : lastErrorMessage();
  return out;
}

ReceiptCheckResult fromReport(const VerifyReport& report) {
  ReceiptCheckResult out;
  out.verdict = verdictName(report.verdict);
  out.good = report.verdict == Verdict::kVerified;
  out.summary = report.summary;
  out.note = report.note;
  out.field = report.field;
  out.request = report.request;
  out.step = report.step;
  out.layer = report.layer;
  out.stage = report.stage;
  out.steps_checked = report.steps_checked;
  return out;
}

ReceiptCheckResult couldNotVerify() {
  VerifyReport report;
  report.summary = std::string("could not verify: ") + lastErrorMessage();
  return fromReport(report);
}

// What runVerification (receipt_commands.cpp) does, returning the report instead of printing it.
ReceiptCheckResult verified(const std::string& path, EngineOptions options) {
  Receipt receipt;
  if (readReceipt(path, &receipt) != Status::kSuccess) return couldNotVerify();
  Status status = validateReceipt(receipt, nullptr);
  if (status == Status::kMismatch) {
    VerifyReport report;
    report.verdict = Verdict::kMismatch;
    report.field = "receipt";
    report.summary = std::string("mismatch: the receipt is inconsistent: ") + lastErrorMessage();
    return fromReport(report);
  }
  if (status != Status::kSuccess) return couldNotVerify();
  ModelIdentity identity;
  if (computeModelIdentity(options.model, &identity) != Status::kSuccess) return couldNotVerify();
  VerifyReport report;
  if (!checkModelIdentity(receipt, identity, &report)) return fromReport(report);
  if (receiptEngineOptions(receipt, &options) != Status::kSuccess) return couldNotVerify();
  std::unique_ptr<Engine> engine;
  if (Engine::create(options, &engine) != Status::kSuccess) return couldNotVerify();
  status = verifyReceipt(receipt, *engine, identity, &report);
  Status shut = engine->shutdown();
  if (status != Status::kSuccess) return fromReport(report);
  if (shut != Status::kSuccess) return couldNotVerify();
  return fromReport(report);
}

}  // namespace

void ReceiptChecker::join() {
  if (thread_.joinable()) thread_.join();
}

void ReceiptChecker::begin(const std::string& path, const char* action) {
  join();
  ReceiptCheckResult running;
  running.running = true;
  running.path = path;
  running.action = action;
  std::lock_guard<std::mutex> lock(mutex_);
  result_ = running;
  busy_ = true;
}

void ReceiptChecker::publish(const ReceiptCheckResult& result) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string path = result_.path, action = result_.action;
    result_ = result;
    result_.path = path;
    result_.action = action;
    result_.done = true;
  }
  busy_ = false;
}

void ReceiptChecker::launch(const std::string& path, const char* action,
                            std::function<ReceiptCheckResult()> job) {
  begin(path, action);
  thread_ = std::thread([this, job] {
    auto start = std::chrono::steady_clock::now();
    ReceiptCheckResult result;
    try {
      result = job();
    } catch (...) {  // nothing may leave the thread: std::terminate would skip endwin()
      result.verdict = "could-not-verify";
      result.summary = "internal error: an exception escaped the library";
    }
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    publish(result);
  });
}

void ReceiptChecker::validate(const std::string& path) {
  launch(path, "validate", [path] { return validated(path); });
}

void ReceiptChecker::verify(const std::string& path, const EngineOptions& options) {
  launch(path, "verify", [path, options] { return verified(path, options); });
}

ReceiptCheckResult ReceiptChecker::result() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return result_;
}

}  // namespace ree::launcher::tui
