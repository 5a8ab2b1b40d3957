#include "metrics.h"

#include <cstdio>

namespace ree::server {

void Metrics::countResponse(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++responses_[{endpoint, status}];
}

void Metrics::countGeneration(int64_t prompt_tokens, int64_t completion_tokens, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  prompt_tokens_ += static_cast<uint64_t>(prompt_tokens);
  completion_tokens_ += static_cast<uint64_t>(completion_tokens);
  for (size_t b = 0; b < kBuckets.size(); ++b) {
    if (seconds <= kBuckets[b]) {
      ++bucket_counts_[b];
      break;
    }
  }
  ++latency_count_;
  latency_sum_ += seconds;
}

void Metrics::countBatch(size_t requests) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++batches_;
  batched_requests_ += requests;
}

void Metrics::countJoined(size_t requests) {
  std::lock_guard<std::mutex> lock(mutex_);
  batched_requests_ += requests;
  joined_requests_ += requests;
}

void Metrics::setQueue(size_t waiting, size_t running) {
  std::lock_guard<std::mutex> lock(mutex_);
  waiting_ = waiting;
  running_ = running;
}

void Metrics::countDisconnect() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++disconnects_;
}

std::string Metrics::render(const KvPoolGauges& kv) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  char line[256];
  auto add = [&](const char* format, auto... values) {
    std::snprintf(line, sizeof(line), format, values...);
    out += line;
  };
  out +=
      "# HELP ree_http_responses_total HTTP answers by endpoint and status code.\n"
      "# TYPE ree_http_responses_total counter\n";
  for (const auto& [key, count] : responses_) {
    add("ree_http_responses_total{endpoint=\"%s\",code=\"%d\"} %llu\n", key.first.c_str(),
        key.second, static_cast<unsigned long long>(count));
  }
  out +=
      "# HELP ree_prompt_tokens_total Prompt tokens of finished generations.\n"
      "# TYPE ree_prompt_tokens_total counter\n";
  add("ree_prompt_tokens_total %llu\n", static_cast<unsigned long long>(prompt_tokens_));
  out +=
      "# HELP ree_generated_tokens_total Tokens generated.\n"
      "# TYPE ree_generated_tokens_total counter\n";
  add("ree_generated_tokens_total %llu\n", static_cast<unsigned long long>(completion_tokens_));
  out +=
      "# HELP ree_engine_batches_total Engine batches (from idle to idle: requests join a running "
      "batch), and the requests they carried.\n"
      "# TYPE ree_engine_batches_total counter\n";
  add("ree_engine_batches_total %llu\n", static_cast<unsigned long long>(batches_));
  out += "# TYPE ree_engine_batched_requests_total counter\n";
  add("ree_engine_batched_requests_total %llu\n",
      static_cast<unsigned long long>(batched_requests_));
  out +=
      "# HELP ree_engine_joined_requests_total Requests admitted into a batch already running "
      "(continuous batching).\n"
      "# TYPE ree_engine_joined_requests_total counter\n";
  add("ree_engine_joined_requests_total %llu\n", static_cast<unsigned long long>(joined_requests_));
  out +=
      "# HELP ree_queue_requests Requests waiting for a place in the engine's batch.\n"
      "# TYPE ree_queue_requests gauge\n";
  add("ree_queue_requests %zu\n", waiting_);
  out +=
      "# HELP ree_running_requests Requests the engine runs now.\n"
      "# TYPE ree_running_requests gauge\n";
  add("ree_running_requests %zu\n", running_);
  out +=
      "# HELP ree_client_disconnects_total Requests whose client went away before the answer "
      "(their generation stopped there).\n"
      "# TYPE ree_client_disconnects_total counter\n";
  add("ree_client_disconnects_total %llu\n", static_cast<unsigned long long>(disconnects_));
  if (kv.blocks > 0) {
    out +=
        "# HELP ree_kv_cache_blocks KV cache pool: blocks, each of ree_kv_cache_block_size "
        "positions.\n"
        "# TYPE ree_kv_cache_blocks gauge\n";
    add("ree_kv_cache_blocks %lld\n", static_cast<long long>(kv.blocks));
    out += "# TYPE ree_kv_cache_block_size gauge\n";
    add("ree_kv_cache_block_size %lld\n", static_cast<long long>(kv.block_size));
    out +=
        "# HELP ree_kv_cache_blocks_used Blocks the running sequences hold now.\n"
        "# TYPE ree_kv_cache_blocks_used gauge\n";
    add("ree_kv_cache_blocks_used %lld\n", static_cast<long long>(kv.used));
    out +=
        "# HELP ree_kv_cache_usage Fraction of the pool's blocks in use.\n"
        "# TYPE ree_kv_cache_usage gauge\n";
    add("ree_kv_cache_usage %.6f\n", static_cast<double>(kv.used) / static_cast<double>(kv.blocks));
  }
  out +=
      "# HELP ree_request_latency_seconds Arrival to last token, per finished generation.\n"
      "# TYPE ree_request_latency_seconds histogram\n";
  uint64_t cumulative = 0;
  for (size_t b = 0; b < kBuckets.size(); ++b) {
    cumulative += bucket_counts_[b];
    add("ree_request_latency_seconds_bucket{le=\"%g\"} %llu\n", kBuckets[b],
        static_cast<unsigned long long>(cumulative));
  }
  add("ree_request_latency_seconds_bucket{le=\"+Inf\"} %llu\n",
      static_cast<unsigned long long>(latency_count_));
  add("ree_request_latency_seconds_sum %.6f\n", latency_sum_);
  add("ree_request_latency_seconds_count %llu\n", static_cast<unsigned long long>(latency_count_));
  return out;
}

}  // namespace ree::server
