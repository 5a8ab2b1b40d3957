#include "scheduler.h"

#include <chrono>

#include "ree/core/log.h"
#include "ree/models/tokenizer.h"

namespace ree::server {
namespace {

ApiError contextError(const std::string& param, const std::string& message) {
  ApiError error = badRequest(param, message);
  error.code = "context_length_exceeded";
  return error;
}

// What a job gets when the engine ended one of its choices with an error: a request the engine
// refused (400), or a failed step (500).
ApiError engineError(Status status, const std::string& message) {
  ApiError error;
  const bool refused = status == Status::kInvalidArgument || status == Status::kOutOfMemory;
  error.http_status = refused ? 400 : 500;
  error.type = refused ? "invalid_request_error" : "server_error";
  error.message = (refused ? "" : "generation failed: ") + clientMessage(message);
  return error;
}

}  // namespace

void Scheduler::ChoiceStop::feed(const std::string& text) {
  if (scanner.stopped()) return;
  scanner.feed(text);
  if (scanner.stopped()) stop->store(true);
}

Scheduler::Scheduler(Engine& engine, ReceiptRunInfo run, ReceiptStore& store, Metrics& metrics,
                     size_t max_queue)
    : engine_(engine),
      run_(std::move(run)),
      store_(store),
      metrics_(metrics),
      max_queue_(max_queue) {}

Scheduler::~Scheduler() {
  drain();
}

void Scheduler::start() {
  thread_ = std::thread([this] { loop(); });
}

Scheduler::Admission Scheduler::submit(const std::shared_ptr<Job>& job) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (draining_) return Admission::kDraining;
  if (queue_.size() >= max_queue_) return Admission::kQueueFull;
  queue_.push_back(job);
  metrics_.setQueue(queue_.size(), running_jobs_);
  changed_.notify_all();
  return Admission::kQueued;
}

void Scheduler::drain() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    draining_ = true;
    changed_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

// The engine loop. It returns once drain() began and every job is answered; a failed step
// answers the jobs in flight with a 500 (the engine reports each) and the loop starts again.
void Scheduler::loop() {
  auto on_token = [this](uint64_t id, int32_t token, const std::string& text,
                         const GenerationResult& so_far) { onToken(id, token, text, so_far); };
  auto on_finished = [this](uint64_t id, Status status, const std::string& error,
                            GenerationResult result) {
    onFinished(id, status, error, std::move(result));
  };
  for (;;) {
    handed_over_ = 0;
    if (engine_.generateFromFeed(*this, on_token, on_finished) == Status::kSuccess) return;
    logMessage(LogLevel::kError, "serve: generation failed: %s", lastErrorMessage());
    if (handed_over_ == 0) return;  // it failed before any work: it would fail again at once
  }
}

// Jobs join in arrival order while the engine holds fewer than max_batch sequences (a job larger
// than that when it holds none). The feed ends once drain() began and no job waits.
bool Scheduler::poll(bool wait, std::vector<FedRequest>* arrived) {
  std::vector<std::shared_ptr<Job>> taken;
  bool busy = false;
  bool open = true;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (wait) changed_.wait(lock, [&] { return draining_ || !queue_.empty(); });
    busy = running_sequences_ > 0;
    const size_t limit = static_cast<size_t>(engine_.options().max_batch);
    while (!queue_.empty()) {
      const size_t n = static_cast<size_t>(queue_.front()->request.n);
      if (running_sequences_ > 0 && running_sequences_ + n > limit) break;
      taken.push_back(queue_.front());
      queue_.pop_front();
      running_sequences_ += n;
      running_jobs_ += 1;
    }
    open = !(draining_ && queue_.empty());
    metrics_.setQueue(queue_.size(), running_jobs_);
  }
  size_t joined = 0;
  for (const std::shared_ptr<Job>& job : taken)
    joined += handOver(job, arrived) ? 1 : 0;
  if (joined > 0) busy ? metrics_.countJoined(joined) : metrics_.countBatch(joined);
  return open;
}

// A job's choices become the engine's requests (ids next_id_...), unless the job fails its
// checks (answered here, its slots given back).
bool Scheduler::handOver(const std::shared_ptr<Job>& job, std::vector<FedRequest>* arrived) {
  GenerationRequest request;
  if (!prepare(*job, &request)) {
    std::lock_guard<std::mutex> lock(mutex_);
    running_sequences_ -= static_cast<size_t>(job->request.n);
    running_jobs_ -= 1;
    metrics_.setQueue(queue_.size(), running_jobs_);
    return false;
  }
  job->markStarted();
  handed_over_ += 1;
  auto running = std::make_shared<RunningJob>();
  running->job = job;
  running->remaining = static_cast<size_t>(job->request.n);
  running->results.resize(running->remaining);
  // Choice c draws as request c of a run of this job alone (`ree-launch run` with n prompts),
  // whenever it joins; its receipt records index c.
  for (size_t choice = 0; choice < running->remaining; ++choice) {
    request.sampling_index = static_cast<uint64_t>(choice);
    request.stop = job->stops.at(choice);
    running->requests.push_back(request);
    running->stops.push_back({StopScanner(job->request.stop), job->stops[choice].get()});
    fed_[next_id_] = {running, choice};
    arrived->push_back({next_id_++, request});
  }
  return true;
}

// The checks that need the model: the prompt's tokens against the context. A failing job is
// answered here and left out of the batch, so it cannot fail its batch-mates.
bool Scheduler::prepare(Job& job, GenerationRequest* request) {
  const CompletionRequest& req = job.request;
  if (job.client_gone) {  // it left while the job was queued: nothing to generate for
    job.fail(clientClosedError());
    return false;
  }
  std::vector<int32_t> ids = req.prompt_ids;
  if (!req.prompt_is_ids) {
    const models::Tokenizer* tokenizer = engine_.tokenizer();
    if (tokenizer == nullptr) {
      job.fail(badRequest("prompt", "this model has no tokenizer: send the prompt as token ids"));
      return false;
    }
    if (tokenizer->encode(req.prompt_text, req.add_special_tokens, &ids) != Status::kSuccess) {
      job.fail(badRequest("prompt", clientMessage(lastErrorMessage())));
      return false;
    }
    if (ids.empty()) {
      job.fail(badRequest("prompt", "the prompt encodes to no tokens"));
      return false;
    }
  }
  const int64_t context = engine_.maxContext();
  if (req.max_tokens_to_context && static_cast<int64_t>(ids.size()) < context) {
    job.request.max_tokens = static_cast<int>(context - static_cast<int64_t>(ids.size()));
  }
  if (req.max_tokens < 1) {  // the parser refuses it; a batch must never meet it
    job.fail(badRequest("max_tokens", "max_tokens must be >= 1"));
    return false;
  }
  if (static_cast<int64_t>(ids.size()) >= context) {
    job.fail(contextError("prompt", "the prompt has " + std::to_string(ids.size()) +
                                        " tokens; the context holds " + std::to_string(context)));
    return false;
  }
  if (static_cast<int64_t>(ids.size()) + req.max_tokens > context) {
    job.fail(contextError("max_tokens",
                          "prompt (" + std::to_string(ids.size()) + " tokens) + max_tokens (" +
                              std::to_string(req.max_tokens) + ") is beyond the context of " +
                              std::to_string(context) + " tokens"));
    return false;
  }
  request->prompt_text = req.prompt_is_ids ? "" : req.prompt_text;
  request->prompt_ids = req.prompt_is_ids ? req.prompt_ids : std::vector<int32_t>{};
  request->add_special_tokens = req.add_special_tokens;
  request->max_new_tokens = req.max_tokens;
  request->sampling = req.sampling;
  request->top_logprobs = req.top_logprobs;  // derived data: the receipt does not record it
  return true;
}

// The engine fills a token's log-probabilities in the result before calling back.
void Scheduler::onToken(uint64_t id, int32_t token, const std::string& text,
                        const GenerationResult& so_far) {
  const FedChoice& fed = fed_.at(id);
  fed.running->stops[fed.choice].feed(text);
  std::optional<TokenLogprobs> logprobs;
  if (fed.running->requests[fed.choice].top_logprobs >= 0) logprobs = so_far.token_logprobs.back();
  fed.running->job->pushToken(static_cast<int>(fed.choice), token, text, std::move(logprobs));
}

// A choice ended. Its job is answered when its last choice ends; a choice that failed stops the
// others, and the job gets the error.
void Scheduler::onFinished(uint64_t id, Status status, const std::string& error,
                           GenerationResult result) {
  auto at = fed_.find(id);
  if (at == fed_.end()) return;
  FedChoice fed = std::move(at->second);
  fed_.erase(at);
  RunningJob& running = *fed.running;
  running.results[fed.choice] = std::move(result);
  if (status != Status::kSuccess && !running.failed) {
    running.failed = true;
    running.error = engineError(status, error);
    logMessage(LogLevel::kError, "serve: %s: %s", running.job->id.c_str(),
               running.error.message.c_str());
    for (const std::shared_ptr<std::atomic<bool>>& stop : running.job->stops)
      stop->store(true);
  }
  running.remaining -= 1;
  const bool job_done = running.remaining == 0;
  if (job_done) {
    if (running.failed) {
      running.job->fail(running.error);
    } else {
      finishJob(*running.job, running.requests, std::move(running.results));
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  running_sequences_ -= 1;
  running_jobs_ -= job_done ? 1 : 0;
  metrics_.setQueue(queue_.size(), running_jobs_);
}

// The receipt first (its requests are the job's choices, indices 0..n-1), then the answer: a
// client never holds an id whose receipt is not on disk.
void Scheduler::finishJob(Job& job, const std::vector<GenerationRequest>& requests,
                          std::vector<GenerationResult> results) {
  // A choice stopped before its first token (its client left) has nothing a receipt could hold.
  for (const GenerationResult& result : results) {
    if (result.output_ids.empty()) {
      logMessage(LogLevel::kInfo, "serve: %s: the client left before the first token; no receipt",
                 job.id.c_str());
      return job.fail(clientClosedError());
    }
  }
  Receipt receipt;
  Status status = makeReceipt(run_, requests, results, &receipt);
  if (status == Status::kSuccess) status = store_.write(job.id, receipt);
  if (status != Status::kSuccess) {
    ApiError error;
    error.http_status = 500;
    error.type = "server_error";
    error.message = "the receipt could not be written: " + clientMessage(lastErrorMessage());
    logMessage(LogLevel::kError, "serve: %s", error.message.c_str());
    job.fail(error);
    return;
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - job.arrived).count();
  int64_t generated = 0;
  for (const GenerationResult& result : results)
    generated += static_cast<int64_t>(result.output_ids.size());
  metrics_.countGeneration(static_cast<int64_t>(results[0].prompt_ids.size()), generated, seconds);
  job.finish(std::move(results), receipt.receipt_sha256);
}

}  // namespace ree::server
