// The device copies of CUDA attention's small per-call host tables (work lists, block table, KV
// slots): uploaded through a ring of pinned buffers, so that a call never synchronises the host
// with the stream, and reused while a decode step repeats the same tables in every layer.
// Host code only. Internal: included by attention.cu only; not a header of its own.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "attention_common.cuh"
#include "pinned_upload.cuh"
#include "ree/core/cuda_check.h"

namespace ree {
namespace repops {
namespace cuda {
namespace {

using namespace attention_detail;  // NOLINT(google-build-using-namespace): one TU

// One ring per device (pinned_upload.cuh): the work lists, block table and KV slots of a call.
Status uploadTables(void* device_dst, const void* host_src, size_t bytes, cudaStream_t stream) {
  return uploadPinned(device_dst, host_src, bytes, stream);
}

// Device copies of the small host tables that repeat from call to call: a decode step runs the
// same attention work lists and KV slots in every layer, so without this every layer would queue
// two host-to-device copies between its kernels. A table whose bytes equal one of the last few
// uploaded on the same device and stream is reused; an evicted copy is freed in stream order
// after the work that read it (on the caller's stream, which is the cache's key and alive during
// the call: a stream that an operation set created may be destroyed before the thread ends). The
// copies are read-only for the kernels.
class TableCache {
 public:
  TableCache() = default;
  TableCache(const TableCache&) = delete;
  TableCache& operator=(const TableCache&) = delete;
  ~TableCache() {  // thread exit: no stream of ours is known to be alive, so a synchronous free
    for (Entry& e : entries_)
      cudaFree(e.device);  // errors ignored: nothing to report them to
  }

  Status get(const void* host, size_t bytes, cudaStream_t stream, const unsigned char** device) {
    ++clock_;
    for (Entry& e : entries_) {
      if (e.bytes.size() == bytes && std::memcmp(e.bytes.data(), host, bytes) == 0) {
        e.used = clock_;
        *device = e.device;
        return Status::kSuccess;
      }
    }
    if (entries_.size() == kEntries) {
      auto oldest =
          std::min_element(entries_.begin(), entries_.end(),
                           [](const Entry& a, const Entry& b) { return a.used < b.used; });
      REE_CUDA_CHECK(cudaFreeAsync(oldest->device, stream));
      entries_.erase(oldest);
    }
    Entry e;
    e.bytes.assign(static_cast<const unsigned char*>(host),
                   static_cast<const unsigned char*>(host) + bytes);
    e.used = clock_;
    REE_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&e.device), bytes, stream));
    Status status = uploadTables(e.device, host, bytes, stream);
    if (status != Status::kSuccess) {
      cudaFreeAsync(e.device, stream);
      return status;
    }
    *device = e.device;
    entries_.push_back(std::move(e));
    return Status::kSuccess;
  }

 private:
  static constexpr size_t kEntries = 4;  // micro-batches in flight on one stage each have tables
  struct Entry {
    std::vector<unsigned char> bytes;
    unsigned char* device = nullptr;
    uint64_t used = 0;
  };
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
};

enum class TableKind : int { kAttention = 0, kKvSlots = 1 };

// The calling thread's cache for (kind, current device, stream).
Status cachedTables(TableKind kind, const void* host, size_t bytes, cudaStream_t stream,
                    const unsigned char** device) {
  thread_local std::map<std::tuple<int, int, cudaStream_t>, TableCache> caches;
  int current = 0;
  REE_CUDA_CHECK(cudaGetDevice(&current));
  return caches[std::make_tuple(static_cast<int>(kind), current, stream)].get(host, bytes, stream,
                                                                              device);
}

}  // namespace
}  // namespace cuda
}  // namespace repops
}  // namespace ree
