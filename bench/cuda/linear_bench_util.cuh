// Shared by the CUDA linear benches (linear_bench.cu: repops-1, int_linear_bench.cu: repops-2):
// fatal checks, bf16-exact device inputs, event timing and the cuBLAS baselines, so that both
// benches measure REE and cuBLAS the same way. Benches exit on any error (they never assert).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "ree/core/status.h"

#define CHECK_CUDA(call)                                                                         \
  do {                                                                                           \
    cudaError_t err_ = (call);                                                                   \
    if (err_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #call, cudaGetErrorString(err_), __FILE__, \
                   __LINE__);                                                                    \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)
#define CHECK_CUBLAS(call)                                                                    \
  do {                                                                                        \
    cublasStatus_t st_ = (call);                                                              \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                       \
      std::fprintf(stderr, "%s failed: %d (%s:%d)\n", #call, static_cast<int>(st_), __FILE__, \
                   __LINE__);                                                                 \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)
#define CHECK_REE(call)                                                        \
  do {                                                                         \
    if ((call) != ree::Status::kSuccess) {                                     \
      std::fprintf(stderr, "%s failed: %s\n", #call, ree::lastErrorMessage()); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

namespace ree::bench {

// Hash-based values in [-0.05, 0.05), exact in bf16, written as bf16 and/or fp32 (either may be
// null) so that both copies hold the same numbers.
__global__ void fillBf16Exact(uint16_t* bf16, float* f32, size_t count, uint32_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    float value = (static_cast<float>(h & 0xffff) / 65536.0f - 0.5f) * 0.1f;
    uint32_t bits = __float_as_uint(value) & 0xffff0000u;  // bf16-exact
    if (bf16) bf16[i] = static_cast<uint16_t>(bits >> 16);
    if (f32) f32[i] = __uint_as_float(bits);
  }
}

// Mean milliseconds of body(i) over `iterations` calls on the default stream, after `warmup`
// untimed calls.
template <typename F>
float timeMs(int iterations, F&& body, int warmup = 3) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  for (int i = 0; i < warmup; ++i)
    body(i);
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaEventRecord(start));
  for (int i = 0; i < iterations; ++i)
    body(i);
  CHECK_CUDA(cudaEventRecord(stop));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  return ms / iterations;
}

// The cuBLAS baselines of row-major Y[M,N] = X[M,K] W[N,K]^T, i.e. column-major
// Y^T[N,M] = W^T (op T on [K,N]) X^T, fp32 y: GemmEx with bf16 inputs and fp32 compute (tensor
// cores, not reproducible), and SGEMM with fp32 inputs.
inline void cublasBf16Linear(cublasHandle_t cublas, int m, int n, int k, const uint16_t* w,
                             const uint16_t* x, float* y) {
  const float alpha = 1.0f, beta = 0.0f;
  CHECK_CUBLAS(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, CUDA_R_16BF, k, x,
                            CUDA_R_16BF, k, &beta, y, CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
}

inline void cublasF32Linear(cublasHandle_t cublas, int m, int n, int k, const float* w,
                            const float* x, float* y) {
  const float alpha = 1.0f, beta = 0.0f;
  CHECK_CUBLAS(
      cublasSgemm(cublas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, k, x, k, &beta, y, n));
}

}  // namespace ree::bench
