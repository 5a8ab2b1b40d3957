// SHA-256 of logits rows on worker threads.
//
// Every generated token's logits row (vocab x fp32, 0.5 MB for a 128k vocabulary) is hashed for
// the result and the receipt. On one core that takes about as long as a GPU decode step's
// non-GEMV work, and nothing in the next step needs the digest, so the engine hands the host
// buffer of the logits (landing_pool.h) to this class and collects the digests later: the hashing
// of step t runs while the GPU computes step t+1, and the rows of a batch are hashed in parallel.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "pipeline_step.h"
#include "ree/runtime/tensor.h"

namespace ree::models {

class AsyncDigester {
 public:
  // `threads` workers (at least 1). submit() waits while `max_pending_rows` or more rows wait to
  // be hashed, then queues its job whole: fewer than max_pending_rows plus one job's rows are ever
  // pending, so a producer faster than the hashing cannot grow memory without bound, and a step
  // of many rows is hashed while the device computes the next one.
  explicit AsyncDigester(int threads, size_t max_pending_rows = 64);
  ~AsyncDigester();  // finishes queued work, then joins the workers
  AsyncDigester(const AsyncDigester&) = delete;
  AsyncDigester& operator=(const AsyncDigester&) = delete;

  // Holds `data` (a host tensor of at least rows x row_floats floats) until its rows are hashed,
  // then lets go of it, and returns a ticket for the rows' digests.
  uint64_t submit(std::shared_ptr<const Tensor> data, size_t rows, size_t row_floats);
  // Waits for the ticket's digests (one per row, in row order) and forgets the ticket. A ticket
  // is taken once; tickets may be taken in any order. Returns false for an unknown ticket.
  bool take(uint64_t ticket, std::vector<Digest>* digests);

  // A sensible worker count for this host: half the hardware threads, 1 to 8 (batch 256 of a
  // 128k vocabulary is 131 MB of logits a step).
  static int defaultThreads();

 private:
  struct Job {
    std::shared_ptr<const Tensor> data;  // null once every row is hashed
    size_t row_floats = 0;
    std::vector<Digest> digests;
    size_t remaining = 0;  // rows not hashed yet
  };
  struct Task {
    std::shared_ptr<Job> job;
    size_t row = 0;
  };
  void work();

  const size_t max_pending_rows_;
  std::mutex mutex_;
  std::condition_variable work_ready_;  // a task was queued, or stopping
  std::condition_variable row_done_;    // a row was hashed (a job may be complete; room freed)
  std::deque<Task> tasks_;
  std::map<uint64_t, std::shared_ptr<Job>> jobs_;
  uint64_t next_ticket_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace ree::models
