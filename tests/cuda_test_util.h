// Helpers shared by the CUDA tests (tests/kernels/cuda/*.cu and any other test that moves host
// vectors to a device): copies in and out, an owned device buffer, and an assertion on CUDA calls.
// Host-only helpers (random values, bitwise comparison, dtypeOf) are in test_util.h.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "test_util.h"

// Fails the current test (and returns from it) when a CUDA runtime call does not succeed.
#define REE_CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

namespace ree::test {

// A device copy of `host` with `slack_bytes` of allocation after the data (so that a kernel's
// last vector load stays inside it). The caller frees it with cudaFree.
template <typename T>
T* toDevice(const std::vector<T>& host, size_t slack_bytes = 16) {
  T* device = nullptr;
  EXPECT_EQ(cudaMalloc(&device, host.size() * sizeof(T) + slack_bytes), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return device;
}

// The first `n` elements at `device`, copied to the host.
template <typename T>
std::vector<T> toHost(const T* device, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

// Device bytes freed on scope exit: `bytes` of data plus `slack_bytes` of allocation after them
// (at least one byte is allocated, so that empty buffers still get a valid pointer).
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;

  explicit DeviceBuffer(size_t size, size_t slack_bytes = 0) : bytes(size) {
    EXPECT_EQ(cudaMalloc(&ptr, std::max<size_t>(size + slack_bytes, 1)), cudaSuccess);
  }
  // A device copy of `host`.
  explicit DeviceBuffer(const std::vector<unsigned char>& host) : DeviceBuffer(host.size()) {
    EXPECT_EQ(cudaMemcpy(ptr, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(ptr); }

  char* at(size_t offset) { return static_cast<char*>(ptr) + offset; }
  // The first `count` bytes, copied to the host.
  std::vector<unsigned char> download(size_t count) const {
    std::vector<unsigned char> host(count);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr, count, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
};

}  // namespace ree::test
