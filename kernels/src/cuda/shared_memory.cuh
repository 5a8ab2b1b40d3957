// Internal CUDA helpers for staging data in shared memory (not installed): cp.async copies and
// the opt-in shared-memory limit.
#pragma once

#include <cuda_runtime.h>

#include <mutex>
#include <set>
#include <utility>

#include "ree/core/cuda_check.h"

namespace ree::repops::cuda {

// Copies src_bytes (0..16) from global and zero-fills the rest of the 16 shared bytes. Both
// addresses are 16-byte aligned; bytes past src_bytes are not read.
__device__ __forceinline__ void cpAsync16(void* shared, const void* global, int src_bytes) {
  unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global),
               "r"(src_bytes));
}
__device__ __forceinline__ void cpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int kPending>
__device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Lets `kernel` take up to the device's opt-in shared memory per block, less its static shared
// memory (the limit covers both). Set once per device and kernel: the attribute call is not
// free, and the launch still passes the bytes it uses.
template <typename Kernel>
Status allowFullSharedMemory(Kernel kernel) {
  int device = 0, optin = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mutex;
  static std::set<std::pair<const void*, int>> configured;  // (kernel, device)
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(reinterpret_cast<const void*>(kernel), device);
  if (configured.count(key) != 0) return Status::kSuccess;
  REE_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  cudaFuncAttributes attributes{};
  REE_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  const int dynamic = optin - static_cast<int>(attributes.sharedSizeBytes);
  REE_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic));
  configured.insert(key);
  return Status::kSuccess;
}

// The device's opt-in shared memory per block (bytes), for the current device.
inline Status sharedMemoryOptin(int* bytes) {
  int device = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  REE_CUDA_CHECK(cudaDeviceGetAttribute(bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return Status::kSuccess;
}

}  // namespace ree::repops::cuda
