// Requests into the scheduler (engine_scheduler.h): a request's checks, generate() (a fixed list),
// generateFromFeed() (requests that arrive while others run) and RequestQueue, the feed that
// other threads push into.
#include <condition_variable>
#include <deque>
#include <mutex>

#include "engine_scheduler.h"
#include "generation_sampling.h"
#include "ree/core/log.h"
#include "token_logprobs.h"

namespace ree {
namespace models {

Status EngineState::prepareRequest(const GenerationRequest& req, size_t r,
                                   GenerationResult* res) const {
  if (!req.prompt_ids.empty()) {
    res->prompt_ids = req.prompt_ids;
  } else {
    if (!tokenizer) {
      return REE_FAIL(Status::kInvalidArgument,
                      "request %zu: the model has no tokenizer (no tokenizer.json, or a GGUF "
                      "file without tokenizer.ggml.* metadata); pass token ids (--prompt-ids)",
                      r);
    }
    REE_RETURN_IF_ERROR(
        tokenizer->encode(req.prompt_text, req.add_special_tokens, &res->prompt_ids));
  }
  if (res->prompt_ids.empty()) {
    return REE_FAIL(Status::kInvalidArgument, "request %zu: the prompt is empty", r);
  }
  const int64_t vocab = config.vocab_size;
  for (size_t i = 0; i < res->prompt_ids.size(); ++i) {
    if (res->prompt_ids[i] < 0 || res->prompt_ids[i] >= vocab) {
      return REE_FAIL(Status::kInvalidArgument,
                      "request %zu: prompt token %zu is id %d, outside the vocabulary [0, %lld)", r,
                      i, res->prompt_ids[i], static_cast<long long>(vocab));
    }
  }
  if (res->prompt_ids.size() >= static_cast<size_t>(max_context)) {
    return REE_FAIL(Status::kInvalidArgument,
                    "request %zu: the prompt has %zu tokens, the context holds %d (%s)", r,
                    res->prompt_ids.size(), max_context, options.names.max_context.c_str());
  }
  REE_CHECK_ARG(req.max_new_tokens >= 1, "request %zu: --max-new-tokens must be >= 1 (got %d)", r,
                req.max_new_tokens);
  // Alone in the pool, the request must reach its end: the positions it caches at most.
  const int64_t prompt = static_cast<int64_t>(res->prompt_ids.size());
  const int64_t longest =
      std::max(prompt + 1, std::min<int64_t>(prompt + req.max_new_tokens - 1, max_context));
  const int64_t blocks = (longest + kv_block_size - 1) / kv_block_size;
  if (blocks > kv_blocks) {
    return REE_FAIL(Status::kOutOfMemory,
                    "request %zu: %lld prompt tokens and up to %d new tokens need %lld KV cache "
                    "blocks of %d tokens, the pool holds %d; raise %s or %s",
                    r, static_cast<long long>(prompt), req.max_new_tokens,
                    static_cast<long long>(blocks), kv_block_size, kv_blocks,
                    options.names.kv_blocks.c_str(), options.names.kv_memory_fraction.c_str());
  }
  REE_CHECK_ARG(req.top_logprobs >= -1 && req.top_logprobs <= kMaxTopLogprobs,
                "request %zu: top_logprobs must be -1 (off) or in [0, %d], got %d", r,
                kMaxTopLogprobs, req.top_logprobs);
  REE_CHECK_ARG(req.top_logprobs < 0 || !multiProcess(),
                "request %zu: top_logprobs needs a single-process engine (the pipeline's last "
                "stage does not send log-probabilities)",
                r);
  return validateSampling(req.sampling, r);
}

}  // namespace models

Status Engine::generate(const std::vector<GenerationRequest>& requests,
                        std::vector<GenerationResult>* results, const TokenCallback& on_token) {
  REE_CHECK_ARG(results != nullptr, "Engine::generate: results is null");
  Impl& m = *impl_;
  REE_CHECK_ARG(m.rank() == 0, "generate() runs on rank 0; rank %d calls serve()", m.rank());
  REE_CHECK_ARG(!m.shut_down, "generate() after shutdown()");
  results->assign(requests.size(), GenerationResult());
  m.dropStaleSteps();
  // Every request is checked before any work, so a bad prompt fails fast.
  for (size_t r = 0; r < requests.size(); ++r)
    REE_RETURN_IF_ERROR(m.prepareRequest(requests[r], r, &(*results)[r]));
  FeedTokenCallback tokens;
  if (on_token) {
    tokens = [&on_token](uint64_t r, int32_t token, const std::string& text,
                         const GenerationResult&) {
      on_token(static_cast<size_t>(r), token, text);
    };
  }
  // The results are the caller's vectors: nothing to hand over when a request ends.
  models::GenerationScheduler scheduler(m, std::move(tokens), {});
  for (size_t r = 0; r < requests.size(); ++r)
    scheduler.add(r, &requests[r], &(*results)[r]);
  const int64_t preempted_before = m.kv_preemptions;
  Status status = scheduler.run(nullptr);
  m.kv_blocks_used.store(m.kv_allocator.usedBlocks(), std::memory_order_relaxed);
  REE_RETURN_IF_ERROR(status);
  if (m.kv_preemptions > preempted_before) {
    logMessage(LogLevel::kInfo, "KV cache full: %lld preemptions (sequences recomputed)",
               static_cast<long long>(m.kv_preemptions - preempted_before));
  }
  return Status::kSuccess;
}

Status Engine::generateFromFeed(RequestFeed& feed, const FeedTokenCallback& on_token,
                                const FeedFinishedCallback& on_finished) {
  Impl& m = *impl_;
  REE_CHECK_ARG(m.rank() == 0, "generateFromFeed() runs on rank 0; rank %d calls serve()",
                m.rank());
  REE_CHECK_ARG(!m.shut_down, "generateFromFeed() after shutdown()");
  if (m.multiProcess()) {
    return REE_FAIL(Status::kInvalidArgument,
                    "continuous batching (generateFromFeed) needs a single-process engine: the "
                    "other %d ranks of this pipeline wait for every step within the transport's "
                    "deadline (%.0f s), which an idle feed would trip; use generate() batches",
                    m.nStages() - 1, m.transport->timeoutSeconds());
  }
  m.dropStaleSteps();
  models::GenerationScheduler scheduler(m, on_token, on_finished);
  const Status status = scheduler.run(&feed);
  m.kv_blocks_used.store(m.kv_allocator.usedBlocks(), std::memory_order_relaxed);
  if (status == Status::kSuccess) return status;
  // A failed step ends every request in flight: each is reported, then the failure returned.
  const std::string error = lastErrorMessage();
  scheduler.failAll(status, error);
  return setError(status, nullptr, 0, "%s", error.c_str());
}

struct RequestQueue::State {
  mutable std::mutex mutex;
  std::condition_variable changed;
  std::deque<FedRequest> queue;
  bool closed = false;
};

RequestQueue::RequestQueue() : state_(std::make_unique<State>()) {}
RequestQueue::~RequestQueue() = default;

bool RequestQueue::push(uint64_t id, GenerationRequest request) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->closed) return false;
  state_->queue.push_back({id, std::move(request)});
  state_->changed.notify_all();
  return true;
}

void RequestQueue::close() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->closed = true;
  state_->changed.notify_all();
}

size_t RequestQueue::queued() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->queue.size();
}

bool RequestQueue::poll(bool wait, std::vector<FedRequest>* arrived) {
  std::unique_lock<std::mutex> lock(state_->mutex);
  if (wait) state_->changed.wait(lock, [&] { return state_->closed || !state_->queue.empty(); });
  while (!state_->queue.empty()) {
    arrived->push_back(std::move(state_->queue.front()));
    state_->queue.pop_front();
  }
  return !state_->closed;
}

}  // namespace ree
