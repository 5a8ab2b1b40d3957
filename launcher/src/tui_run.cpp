#include "tui_run.h"

#include "receipt_commands.h"
#include "tui_files.h"

namespace ree::launcher::tui {
namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<StageInfo> stagesOf(const Engine& engine, const EngineOptions& options) {
  std::vector<StageInfo> stages;
  const std::vector<partitioner::Stage>& plan = engine.plan();
  for (size_t s = 0; s < plan.size(); ++s) {
    StageInfo info;
    info.first_layer = plan[s].first_layer;
    info.end_layer = plan[s].end_layer;
    info.parameter_bytes = plan[s].parameter_bytes;
    info.device =
        (options.stage_devices.size() > s ? options.stage_devices[s] : options.device).str();
    stages.push_back(info);
  }
  return stages;
}

}  // namespace

const char* runPhaseName(RunPhase phase) {
  switch (phase) {
    case RunPhase::kIdle:
      return "idle";
    case RunPhase::kLoading:
      return "loading the model";
    case RunPhase::kGenerating:
      return "generating";
    case RunPhase::kWritingReceipt:
      return "writing the receipt";
    case RunPhase::kDone:
      return "done";
    case RunPhase::kFailed:
      return "failed";
    case RunPhase::kCancelled:
      return "cancelled";
  }
  return "?";
}

RunWorker::~RunWorker() {
  cancel();
  join();
}

void RunWorker::join() {
  if (thread_.joinable()) thread_.join();
}

void RunWorker::start(const LaunchOptions& options, const std::string& command_line) {
  join();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    state_ = RunSnapshot();
    state_.phase = RunPhase::kLoading;
    state_.model = options.engine.model;
    state_.command_line = command_line;
    for (const GenerationRequest& request : options.requests) {
      RequestProgress progress;
      progress.max_new_tokens = request.max_new_tokens;
      state_.requests.push_back(progress);
    }
  }
  cancel_requested_ = false;
  busy_ = true;
  thread_ = std::thread([this, options] { work(options); });
}

RunSnapshot RunWorker::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  RunSnapshot copy = state_;
  if (copy.phase == RunPhase::kGenerating) copy.generate_seconds = secondsSince(generate_start_);
  return copy;
}

void RunWorker::finish(RunPhase phase, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    state_.phase = phase;
    state_.message = message;
  }
  busy_ = false;
}

void RunWorker::work(LaunchOptions options) {
  try {
    auto load_start = std::chrono::steady_clock::now();
    std::unique_ptr<Engine> engine;
    if (Engine::create(options.engine, &engine) != Status::kSuccess) {
      return finish(RunPhase::kFailed, lastErrorMessage());
    }
    rememberModel(options.engine.model);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      state_.load_seconds = secondsSince(load_start);
      state_.stages = stagesOf(*engine, options.engine);
    }
    if (cancel_requested_) return finish(RunPhase::kCancelled, "cancelled before the first token");
    generateAndReport(*engine, options);
  } catch (const std::exception& error) {
    finish(RunPhase::kFailed, std::string("internal error: ") + error.what());
  } catch (...) {  // nothing may leave the thread: std::terminate would skip endwin()
    finish(RunPhase::kFailed, "internal error: an unknown exception");
  }
}

void RunWorker::generateAndReport(Engine& engine, const LaunchOptions& options) {
  auto on_token = [this](size_t request, int32_t, const std::string& text) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      state_.requests[request].text += text;
      state_.requests[request].tokens += 1;
      state_.tokens += 1;
    }
  };
  // cancel() stops every request through the engine's stop flag (GenerationRequest::stop), read
  // at each step boundary: they end after the token being produced, their KV blocks freed, and
  // generate() returns normally. The pointer does not own the flag: this worker outlives the
  // run (its destructor joins the thread).
  std::shared_ptr<const std::atomic<bool>> stop(std::shared_ptr<void>(), &cancel_requested_);
  std::vector<GenerationRequest> requests = options.requests;
  for (GenerationRequest& request : requests)
    request.stop = stop;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generate_start_ = std::chrono::steady_clock::now();
    state_.phase = RunPhase::kGenerating;
  }
  std::vector<GenerationResult> results;
  Status status = engine.generate(requests, &results, on_token);
  if (status == Status::kSuccess && cancel_requested_) {
    std::lock_guard<std::mutex> lock(mutex_);
    state_.generate_seconds = secondsSince(generate_start_);
    state_.phase = RunPhase::kCancelled;
    state_.message = "cancelled after " + std::to_string(state_.tokens) + " token(s)";
    busy_ = false;
    return;
  }
  double seconds = secondsSince(generate_start_);
  if (status == Status::kSuccess) status = engine.shutdown();
  if (status != Status::kSuccess) return finish(RunPhase::kFailed, lastErrorMessage());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    state_.generate_seconds = seconds;
    for (size_t r = 0; r < results.size(); ++r) {
      state_.requests[r].text = results[r].text;
      state_.requests[r].tokens = static_cast<int64_t>(results[r].output_ids.size());
      state_.requests[r].finish_reason = results[r].finish_reason;
      state_.requests[r].output_ids_sha256 = results[r].output_ids_sha256;
    }
    if (!options.receipt_path.empty()) state_.phase = RunPhase::kWritingReceipt;
  }
  if (options.receipt_path.empty()) return finish(RunPhase::kDone, "");
  if (writeRunReceipt(options.receipt_path, options.engine, engine, options.requests, results) !=
      Status::kSuccess) {
    return finish(RunPhase::kFailed, lastErrorMessage());
  }
  finish(RunPhase::kDone, "receipt written to " + options.receipt_path);
}

}  // namespace ree::launcher::tui
