#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "ree/core/parallel.h"

namespace ree {
namespace {

int defaultThreads() {
  if (const char* env = std::getenv("REE_CPU_THREADS")) {
    int value = std::atoi(env);
    if (value > 0) return value;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

std::atomic<int> g_threads{0};
thread_local bool t_inside_parallel = false;

// A persistent pool: workers wait for a job (a range splitter) and take ranges from a counter.
class Pool {
 public:
  static Pool& instance() {
    static Pool pool;
    return pool;
  }

  void run(int workers, int64_t n, int64_t chunk,
           const std::function<void(int64_t, int64_t)>& body) {
    std::unique_lock<std::mutex> run_lock(run_mutex_);  // one parallel region at a time
    ensureWorkers(workers - 1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = &body;
      n_ = n;
      chunk_ = chunk;
      next_.store(0);
      active_ = workers - 1;
      active_initial_ = workers - 1;
      ++generation_;
    }
    cv_.notify_all();
    work();
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return active_ == 0; });
    body_ = nullptr;
  }

  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      ++generation_;
    }
    cv_.notify_all();
    for (auto& t : threads_)
      t.join();
  }

 private:
  void ensureWorkers(int count) {
    while (static_cast<int>(threads_.size()) < count) {
      int index = static_cast<int>(threads_.size());
      threads_.emplace_back([this, index] { loop(index); });
    }
  }

  void work() {
    t_inside_parallel = true;
    for (;;) {
      int64_t begin = next_.fetch_add(chunk_);
      if (begin >= n_) break;
      (*body_)(begin, std::min(n_, begin + chunk_));
    }
    t_inside_parallel = false;
  }

  void loop(int index) {
    uint64_t seen = 0;
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      // Only the first `active_` workers join this job.
      if (index >= participants_()) continue;
      lock.unlock();
      work();
      lock.lock();
      if (--active_ == 0) done_cv_.notify_all();
    }
  }

  int participants_() const { return active_initial_; }

  std::mutex run_mutex_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  std::vector<std::thread> threads_;
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  std::atomic<int64_t> next_{0};
  int active_ = 0;
  int active_initial_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace

void setCpuThreads(int threads) {
  g_threads.store(threads > 0 ? threads : 0);
}

int cpuThreads() {
  int threads = g_threads.load();
  // Read once: hardware_concurrency() reads /sys on Linux (5-20 us), too slow for every call.
  static const int default_threads = defaultThreads();
  return threads > 0 ? threads : default_threads;
}

void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int threads = cpuThreads();
  int64_t max_useful = (n + grain - 1) / grain;
  int workers = static_cast<int>(std::min<int64_t>(threads, max_useful));
  if (workers <= 1 || t_inside_parallel) {
    body(0, n);
    return;
  }
  // Several ranges per worker balance uneven rows; the split never affects results.
  int64_t chunk = std::max<int64_t>(grain, (n + workers * 4 - 1) / (workers * 4));
  Pool::instance().run(workers, n, chunk, body);
}

}  // namespace ree
