// Internal CUDA helpers for RepOps kernels (not installed).
#pragma once

#include <cuda_runtime.h>

#include "ree/kernels/status.h"

// Checks a CUDA runtime call; on failure records "call: cudaError name (file:line)" and returns.
#define REE_CUDA_CHECK(call)                                                              \
  do {                                                                                    \
    cudaError_t ree_cuda_err_ = (call);                                                   \
    if (ree_cuda_err_ != cudaSuccess) {                                                   \
      return ::ree::setError(                                                             \
          ree_cuda_err_ == cudaErrorMemoryAllocation ? ::ree::Status::kOutOfMemory        \
                                                     : ::ree::Status::kCudaError,         \
          __FILE__, __LINE__, "%s failed: %s", #call, cudaGetErrorString(ree_cuda_err_)); \
    }                                                                                     \
  } while (0)

// Checks the launch of the kernel just issued (configuration errors surface here).
#define REE_CUDA_CHECK_LAUNCH() REE_CUDA_CHECK(cudaGetLastError())

namespace ree {
inline unsigned divUp(long long a, long long b) {
  return static_cast<unsigned>((a + b - 1) / b);
}
}  // namespace ree
