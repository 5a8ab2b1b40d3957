#include "scheduler.h"

#include <chrono>

#include "ree/core/log.h"
#include "ree/models/tokenizer.h"
#include "stop_strings.h"

namespace ree::server {
namespace {

ApiError contextError(const std::string& param, const std::string& message) {
  ApiError error = badRequest(param, message);
  error.code = "context_length_exceeded";
  return error;
}

// The text of one choice as the engine produces it, scanned for the request's stop strings: the
// choice's stop flag is set when one is complete, so the engine ends it after that token.
struct ChoiceStop {
  StopScanner scanner;
  std::atomic<bool>* stop = nullptr;
  void feed(const std::string& text) {
    if (scanner.stopped()) return;
    scanner.feed(text);
    if (scanner.stopped()) stop->store(true);
  }
};

}  // namespace

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
  metrics_.setQueue(queue_.size(), running_);
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

void Scheduler::loop() {
  for (;;) {
    std::vector<std::shared_ptr<Job>> batch = takeBatch();
    if (batch.empty()) return;  // draining and nothing left
    runBatch(batch);
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = 0;
    metrics_.setQueue(queue_.size(), running_);
  }
}

// Arrival order, up to max_batch sequences (a job brings request.n of them); a job larger than
// max_batch runs alone (the engine queues what exceeds its slots). Sampled jobs mix freely: each
// choice draws with its own sampling index (runBatch), never its batch position.
std::vector<std::shared_ptr<Job>> Scheduler::takeBatch() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return draining_ || !queue_.empty(); });
  std::vector<std::shared_ptr<Job>> batch;
  size_t sequences = 0;
  const size_t limit = static_cast<size_t>(engine_.options().max_batch);
  while (!queue_.empty()) {
    const size_t n = static_cast<size_t>(queue_.front()->request.n);
    if (!batch.empty() && sequences + n > limit) break;
    batch.push_back(queue_.front());
    sequences += n;
    queue_.pop_front();
  }
  running_ = batch.size();
  metrics_.setQueue(queue_.size(), running_);
  return batch;
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

void Scheduler::runBatch(const std::vector<std::shared_ptr<Job>>& batch) {
  std::vector<std::shared_ptr<Job>> jobs;
  std::vector<GenerationRequest> requests;
  std::vector<std::pair<Job*, int>> owner;  // the job and choice of every batch position
  std::vector<ChoiceStop> stops;            // and its stop-string scanner
  for (const std::shared_ptr<Job>& job : batch) {
    GenerationRequest request;
    if (!prepare(*job, &request)) continue;
    job->markStarted();
    jobs.push_back(job);
    // Choice c draws as request c of a run of this job alone (`ree-launch run` with n prompts),
    // wherever the batch puts it; its receipt records index c.
    for (int choice = 0; choice < job->request.n; ++choice) {
      request.sampling_index = static_cast<uint64_t>(choice);
      request.stop = job->stops.at(static_cast<size_t>(choice));
      requests.push_back(request);
      owner.emplace_back(job.get(), choice);
      stops.push_back(
          {StopScanner(job->request.stop), job->stops[static_cast<size_t>(choice)].get()});
    }
  }
  if (jobs.empty()) return;
  metrics_.countBatch(jobs.size());
  std::vector<GenerationResult> results;
  // The engine fills a token's log-probabilities in its result before calling back.
  auto on_token = [&owner, &stops, &requests, &results](size_t r, int32_t token,
                                                        const std::string& text) {
    stops[r].feed(text);
    std::optional<TokenLogprobs> logprobs;
    if (requests[r].top_logprobs >= 0) logprobs = results[r].token_logprobs.back();
    owner[r].first->pushToken(owner[r].second, token, text, std::move(logprobs));
  };
  if (engine_.generate(requests, &results, on_token) != Status::kSuccess) {
    ApiError error;
    error.http_status = 500;
    error.type = "server_error";
    error.message = "generation failed: " + clientMessage(lastErrorMessage());
    logMessage(LogLevel::kError, "serve: %s", error.message.c_str());
    for (const std::shared_ptr<Job>& job : jobs)
      job->fail(error);
    return;
  }
  size_t first = 0;
  for (const std::shared_ptr<Job>& job : jobs) {
    const size_t end = first + static_cast<size_t>(job->request.n);
    finishJob(*job, {requests.begin() + first, requests.begin() + end},
              {std::make_move_iterator(results.begin() + first),
               std::make_move_iterator(results.begin() + end)});
    first = end;
  }
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
