// The one way REE checks CUDA and NCCL calls (NCCL's CUDACHECK/NCCLCHECK habit): on failure the
// macro records "<context or call> failed: <library's error string> (file:line) [status]" as the
// thread's last error and returns that ree::Status from the enclosing function. Include it only
// from translation units compiled with the CUDA runtime; the NCCL macros exist when <nccl.h> was
// included first.
#pragma once

#include <cuda_runtime.h>

#include "ree/core/status.h"

namespace ree {
// The status a CUDA runtime error maps to: allocation failures are kOutOfMemory, the rest
// kCudaError. Clears CUDA's sticky last error so that the next call starts clean.
inline Status cudaStatus(cudaError_t err) {
  cudaGetLastError();
  return err == cudaErrorMemoryAllocation ? Status::kOutOfMemory : Status::kCudaError;
}
}  // namespace ree

// Checks a CUDA runtime call; the message names the call.
#define REE_CUDA_CHECK(call)                                                             \
  do {                                                                                   \
    cudaError_t ree_cuda_err_ = (call);                                                  \
    if (ree_cuda_err_ != cudaSuccess) {                                                  \
      return ::ree::setError(::ree::cudaStatus(ree_cuda_err_), __FILE__, __LINE__,       \
                             "%s failed: %s", #call, cudaGetErrorString(ree_cuda_err_)); \
    }                                                                                    \
  } while (0)

// Checks a CUDA runtime call; the message is the printf-style context (which should name the
// tensor, device or rank involved) followed by the CUDA error string.
#define REE_CUDA_CHECK_MSG(call, format, ...)                                      \
  do {                                                                             \
    cudaError_t ree_cuda_err_ = (call);                                            \
    if (ree_cuda_err_ != cudaSuccess) {                                            \
      return ::ree::setError(::ree::cudaStatus(ree_cuda_err_), __FILE__, __LINE__, \
                             format " failed: %s", __VA_ARGS__,                    \
                             cudaGetErrorString(ree_cuda_err_));                   \
    }                                                                              \
  } while (0)

// Checks the launch of the kernel just issued (configuration errors surface here).
#define REE_CUDA_CHECK_LAUNCH() REE_CUDA_CHECK(cudaGetLastError())

#if defined(NCCL_H_) || defined(NCCL_MAJOR)
// Checks an NCCL call on a non-blocking communicator (ncclInProgress is not a failure); the
// message is the context (name the rank) followed by NCCL's error string.
#define REE_NCCL_CHECK_MSG(call, format, ...)                                                     \
  do {                                                                                            \
    ncclResult_t ree_nccl_rc_ = (call);                                                           \
    if (ree_nccl_rc_ != ncclSuccess && ree_nccl_rc_ != ncclInProgress) {                          \
      return ::ree::setError(::ree::Status::kCommError, __FILE__, __LINE__, format " failed: %s", \
                             __VA_ARGS__, ncclGetErrorString(ree_nccl_rc_));                      \
    }                                                                                             \
  } while (0)
#endif
