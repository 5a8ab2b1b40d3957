// The scheduler thread: takes the queued jobs and runs them through the one Engine in batches.
// Jobs arriving while a batch runs wait for the next one, in arrival order. The sampler's key is
// (seed, sampling index, step), and choice c of a job gets sampling index c wherever it sits in
// the batch (GenerationRequest::sampling_index), so a job with n choices draws what `ree-launch
// run` with its prompt n times draws, whatever else is in flight, and its receipt (the n choices
// as requests 0..n-1) verifies. In reproducible mode nothing else of a job depends on its
// batch-mates. Each choice carries its job's stop flag (GenerationRequest::stop): set here when
// the choice's text completes a stop string, or by the HTTP handler when the client goes away, it
// ends the choice at the engine's next step.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "job.h"
#include "metrics.h"
#include "receipt_store.h"
#include "ree/models/receipt.h"

namespace ree::server {

class Scheduler {
 public:
  Scheduler(Engine& engine, ReceiptRunInfo run, ReceiptStore& store, Metrics& metrics,
            size_t max_queue);
  ~Scheduler();

  void start();
  enum class Admission { kQueued, kDraining, kQueueFull };
  // Queues a job, unless drain() began (the caller answers 503) or max_queue jobs wait (429).
  Admission submit(const std::shared_ptr<Job>& job);
  // Stops taking new jobs, finishes every queued and running one, then joins the thread.
  void drain();

 private:
  void loop();
  std::vector<std::shared_ptr<Job>> takeBatch();
  bool prepare(Job& job, GenerationRequest* request);
  void runBatch(const std::vector<std::shared_ptr<Job>>& batch);
  void finishJob(Job& job, const std::vector<GenerationRequest>& requests,
                 std::vector<GenerationResult> results);

  Engine& engine_;
  ReceiptRunInfo run_;
  ReceiptStore& store_;
  Metrics& metrics_;
  const size_t max_queue_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::shared_ptr<Job>> queue_;
  size_t running_ = 0;  // jobs in the batch that runs now
  bool draining_ = false;
  std::thread thread_;
};

}  // namespace ree::server
