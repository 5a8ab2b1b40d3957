// A small ring of pinned host buffers for host-to-device uploads that must not make the host wait
// for the stream (attention's per-call tables, the sampler's parameters). Host code only.
// Internal to the CUDA kernels: each translation unit that includes it has its own rings.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>

#include "ree/core/cuda_check.h"
#include "ree/core/status.h"

namespace ree {
namespace repops {
namespace cuda {
namespace {

// Uploads small per-call host arrays through pinned memory: a cudaMemcpyAsync from pageable memory
// synchronises the stream, which would serialise the host with every call. A small ring
// of pinned buffers per host thread; a slot is reused once the copy that last read it has run.
// The ring's events and pinned memory are made at the first upload, all at once: made slot by slot
// (a cudaMallocHost of tens of us each), a decode step that uploads two tables paid for two new
// slots in its first layer, with the GPU idle, for the first 16 steps of every run.
class PinnedUploader {
 public:
  Status upload(void* device_dst, const void* host_src, size_t bytes, cudaStream_t stream) {
    if (ring_ == nullptr) REE_RETURN_IF_ERROR(makeRing());
    Slot& slot = slots_[next_++ % kSlots];
    REE_CUDA_CHECK(cudaEventSynchronize(slot.event));  // never recorded: returns at once
    if (slot.capacity < bytes) {
      if (slot.owned) REE_CUDA_CHECK(cudaFreeHost(slot.host));
      slot.host = nullptr;
      slot.capacity = 0;
      slot.owned = false;
      const size_t capacity = std::max<size_t>(bytes * 2, kSlotBytes);
      REE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&slot.host), capacity));
      slot.capacity = capacity;
      slot.owned = true;
    }
    std::memcpy(slot.host, host_src, bytes);
    REE_CUDA_CHECK(cudaMemcpyAsync(device_dst, slot.host, bytes, cudaMemcpyHostToDevice, stream));
    REE_CUDA_CHECK(cudaEventRecord(slot.event, stream));
    return Status::kSuccess;
  }

 private:
  static constexpr int kSlots = 32;  // two uploads per layer: the host may run 16 layers ahead
  static constexpr size_t kSlotBytes = 64 * 1024;  // a decode step's tables fit many times over
  struct Slot {
    unsigned char* host = nullptr;
    size_t capacity = 0;
    bool owned = false;  // grown past kSlotBytes: its own cudaMallocHost, not the ring's memory
    cudaEvent_t event = nullptr;
  };

  Status makeRing() {
    for (Slot& slot : slots_) {
      if (slot.event != nullptr) continue;  // made by an earlier try that failed later
      REE_CUDA_CHECK(cudaEventCreateWithFlags(&slot.event, cudaEventDisableTiming));
    }
    REE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&ring_), kSlots * kSlotBytes));
    for (int i = 0; i < kSlots; ++i) {
      slots_[i].host = ring_ + i * kSlotBytes;
      slots_[i].capacity = kSlotBytes;
    }
    return Status::kSuccess;
  }

  Slot slots_[kSlots];
  unsigned char* ring_ = nullptr;
  unsigned next_ = 0;
};

// Copies `bytes` from host_src to device_dst in the order of `stream`, without waiting for the
// stream; host_src may be reused at once. One ring per device and host thread: a slot's event is
// recorded on the stream it served, and an event may only be recorded on streams of the device it
// was created on.
inline Status uploadPinned(void* device_dst, const void* host_src, size_t bytes,
                           cudaStream_t stream) {
  thread_local std::map<int, PinnedUploader> uploaders;
  int device = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  return uploaders[device].upload(device_dst, host_src, bytes, stream);
}

}  // namespace
}  // namespace cuda
}  // namespace repops
}  // namespace ree
