// The scheduler: one engine loop for the server's life (Engine::generateFromFeed, continuous
// batching), fed from the HTTP handlers' queue. At every step boundary the engine asks for new
// jobs (poll): those waiting join the sequences running, in arrival order, while the engine holds
// at most max_batch sequences (a job brings request.n of them; one larger than max_batch runs
// when nothing else does), so a request arriving mid-generation starts at the next step instead
// of waiting for the others to end; each job is answered as soon as its own choices end. The
// sampler's key is (seed, sampling index, step), and choice c of a job gets sampling index c
// (GenerationRequest::sampling_index), so a job with n choices draws what `ree-launch run` with
// its prompt n times draws, whatever else is in flight and whenever it joined, and its receipt
// (the n choices as requests 0..n-1) verifies. In reproducible mode nothing else of a job depends
// on what ran beside it. Each choice carries its job's stop flag (GenerationRequest::stop): set
// here when the choice's text completes a stop string, or by the HTTP handler when the client
// goes away, it ends the choice at the engine's next step and frees its KV cache blocks.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "job.h"
#include "metrics.h"
#include "receipt_store.h"
#include "ree/models/receipt.h"
#include "stop_strings.h"

namespace ree::server {

class Scheduler : private RequestFeed {
 public:
  Scheduler(Engine& engine, ReceiptRunInfo run, ReceiptStore& store, Metrics& metrics,
            size_t max_queue);
  ~Scheduler() override;

  void start();
  enum class Admission { kQueued, kDraining, kQueueFull };
  // Queues a job, unless drain() began (the caller answers 503) or max_queue jobs wait (429).
  Admission submit(const std::shared_ptr<Job>& job);
  // Stops taking new jobs, finishes every queued and running one, then joins the thread.
  void drain();

 private:
  // The text of one choice as the engine produces it, scanned for the request's stop strings:
  // the choice's stop flag is set when one is complete, so the engine ends it after that token.
  struct ChoiceStop {
    StopScanner scanner;
    std::atomic<bool>* stop = nullptr;
    void feed(const std::string& text);
  };
  // A job the engine runs: its choices' requests, results and stop scanners.
  struct RunningJob {
    std::shared_ptr<Job> job;
    std::vector<GenerationRequest> requests;
    std::vector<GenerationResult> results;
    std::vector<ChoiceStop> stops;
    size_t remaining = 0;  // choices not yet reported by the engine
    bool failed = false;
    ApiError error;
  };
  struct FedChoice {
    std::shared_ptr<RunningJob> running;
    size_t choice = 0;
  };

  void loop();
  // The engine thread's poll at each step boundary (RequestFeed).
  bool poll(bool wait, std::vector<FedRequest>* arrived) override;
  bool handOver(const std::shared_ptr<Job>& job, std::vector<FedRequest>* arrived);
  bool prepare(Job& job, GenerationRequest* request);
  void onToken(uint64_t id, int32_t token, const std::string& text, const GenerationResult& so_far);
  void onFinished(uint64_t id, Status status, const std::string& error, GenerationResult result);
  void finishJob(Job& job, const std::vector<GenerationRequest>& requests,
                 std::vector<GenerationResult> results);

  Engine& engine_;
  ReceiptRunInfo run_;
  ReceiptStore& store_;
  Metrics& metrics_;
  const size_t max_queue_;
  std::mutex mutex_;
  std::condition_variable changed_;
  // Guarded by mutex_: jobs waiting for the engine, and what it runs now.
  std::deque<std::shared_ptr<Job>> queue_;
  size_t running_jobs_ = 0;
  size_t running_sequences_ = 0;
  bool draining_ = false;
  // The engine thread's own: every choice handed over and not yet reported, by its feed id.
  std::map<uint64_t, FedChoice> fed_;
  uint64_t next_id_ = 0;
  size_t handed_over_ = 0;  // jobs given to the engine in the current generateFromFeed call
  std::thread thread_;
};

}  // namespace ree::server
