// GET /metrics: counters, gauges and a latency histogram in the Prometheus text format (0.0.4).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace ree::server {

// The engine's KV cache pool, read when /metrics is asked (Engine::kvCacheBlocks*).
struct KvPoolGauges {
  int64_t blocks = 0;  // 0: not shown
  int64_t used = 0;
  int64_t block_size = 0;
};

class Metrics {
 public:
  // An HTTP answer: endpoint ("completions", "receipts", ...) and status code.
  void countResponse(const std::string& endpoint, int status);
  // A finished generation: tokens and the seconds from arrival to the last token.
  void countGeneration(int64_t prompt_tokens, int64_t completion_tokens, double seconds);
  // Jobs handed to an idle engine (a batch begins), or joining the sequences it runs.
  void countBatch(size_t requests);
  void countJoined(size_t requests);
  void setQueue(size_t waiting, size_t running);
  // A request whose client went away before its answer (its generation stopped early).
  void countDisconnect();
  std::string render(const KvPoolGauges& kv = {}) const;

 private:
  static constexpr std::array<double, 12> kBuckets = {0.05, 0.1, 0.25, 0.5, 1,   2.5,
                                                      5,    10,  30,   60,  120, 300};
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> responses_;
  uint64_t prompt_tokens_ = 0;
  uint64_t completion_tokens_ = 0;
  uint64_t batches_ = 0;
  uint64_t batched_requests_ = 0;
  uint64_t joined_requests_ = 0;
  size_t waiting_ = 0;
  size_t running_ = 0;
  uint64_t disconnects_ = 0;
  std::array<uint64_t, kBuckets.size()> bucket_counts_{};  // cumulative at render time
  uint64_t latency_count_ = 0;
  double latency_sum_ = 0;
};

}  // namespace ree::server
