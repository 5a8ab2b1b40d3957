#include "async_digester.h"

#include <algorithm>

namespace ree::models {

AsyncDigester::AsyncDigester(int threads, size_t max_pending_rows)
    : max_pending_rows_(std::max<size_t>(1, max_pending_rows)) {
  for (int i = 0; i < std::max(1, threads); ++i)
    workers_.emplace_back([this] { work(); });
}

AsyncDigester::~AsyncDigester() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& worker : workers_)
    worker.join();
}

int AsyncDigester::defaultThreads() {
  unsigned hardware = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(hardware / 2, 1u, 8u));
}

uint64_t AsyncDigester::submit(std::shared_ptr<const Tensor> data, size_t rows, size_t row_floats) {
  auto job = std::make_shared<Job>();
  job->data = std::move(data);
  job->row_floats = row_floats;
  job->digests.resize(rows);
  job->remaining = rows;
  std::unique_lock<std::mutex> lock(mutex_);
  uint64_t ticket = next_ticket_++;
  jobs_[ticket] = job;
  // The job goes in whole once the queue is below the bound (the queue drains, so this cannot
  // deadlock). Waiting row by row made a step of more rows than the bound wait for most of its
  // own hashing before the next step could be queued on the device (batch 256: 22 ms a step).
  row_done_.wait(lock, [&] { return tasks_.size() < max_pending_rows_; });
  for (size_t r = 0; r < rows; ++r)
    tasks_.push_back({job, r});
  work_ready_.notify_all();
  return ticket;
}

bool AsyncDigester::take(uint64_t ticket, std::vector<Digest>* digests) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = jobs_.find(ticket);
  if (it == jobs_.end()) return false;
  std::shared_ptr<Job> job = it->second;
  row_done_.wait(lock, [&] { return job->remaining == 0; });
  *digests = std::move(job->digests);
  jobs_.erase(it);
  return true;
}

void AsyncDigester::work() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to hash
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    Job& job = *task.job;
    // Rows are disjoint: each worker writes only its own digest slot, outside the lock.
    const float* rows = job.data->as<const float>();
    Digest digest = sha256Digest(rows + task.row * job.row_floats, job.row_floats * sizeof(float));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job.digests[task.row] = digest;
      job.remaining -= 1;
      // The buffer goes back (landing_pool.h) before take() can see the job complete.
      if (job.remaining == 0) job.data.reset();
    }
    row_done_.notify_all();
  }
}

}  // namespace ree::models
