// Shared by the CUDA linear benches (linear_bench.cu: repops-1, int_linear_bench.cu: repops-2,
// int_linear_row_bench.cu: repops-3, quant_linear_bench.cu): fatal checks, bf16-exact device
// inputs, event timing, the copy bandwidth and the cuBLAS baselines, so that the benches measure
// REE and cuBLAS the same way. Benches exit on any error (they never assert).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ree/core/status.h"
#include "ree/kernels/linear.h"

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

// What a linear bench's main() sets up: the iteration count (argv[1], default 20), device 0's
// properties and a cuBLAS handle (destroyed on scope exit).
struct LinearBenchContext {
  int iterations = 20;
  cudaDeviceProp prop{};
  cublasHandle_t cublas = nullptr;

  LinearBenchContext(int argc, char** argv) {
    if (argc > 1) iterations = std::atoi(argv[1]);
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    CHECK_CUBLAS(cublasCreate(&cublas));
  }
  LinearBenchContext(const LinearBenchContext&) = delete;
  LinearBenchContext& operator=(const LinearBenchContext&) = delete;
  ~LinearBenchContext() { CHECK_CUBLAS(cublasDestroy(cublas)); }
};

// The Llama-3-8B projections both benches measure, K x N: q and o (4096 x 4096), gate and up
// (4096 x 14336), down (14336 x 4096).
inline constexpr int kLlamaProjections[3][2] = {{4096, 4096}, {4096, 14336}, {14336, 4096}};

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

// The device's D2D copy bandwidth in GB/s, read and write counted: 1 GiB copied 10 times.
inline double copyBandwidthGBs() {
  const size_t bytes = size_t(1) << 30;
  void *a, *b;
  CHECK_CUDA(cudaMalloc(&a, bytes));
  CHECK_CUDA(cudaMalloc(&b, bytes));
  CHECK_CUDA(cudaMemset(a, 1, bytes));
  const float ms =
      timeMs(10, [&](int) { CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); });
  CHECK_CUDA(cudaFree(a));
  CHECK_CUDA(cudaFree(b));
  return 2.0 * bytes / (ms * 1e-3) / 1e9;
}

// The device tensors of one [M, K] x [N, K]^T problem: bf16 x and w, fp32 y, and fp32 copies of x
// and w (the same values) for SGEMM. w has `bf16_copies` and `f32_copies` copies (copy c from seed
// 17 + c: a rotation through more bytes than L2 holds streams the weights from memory); x comes
// from seed 99. Freed on scope exit.
struct DeviceLinearProblem {
  int m, n, k;
  std::vector<uint16_t*> w_bf16;
  std::vector<float*> w_f32;
  uint16_t* x_bf16 = nullptr;
  float* x_f32 = nullptr;
  float* y = nullptr;

  DeviceLinearProblem(int rows, int outputs, int features, int bf16_copies = 1, int f32_copies = 1)
      : m(rows), n(outputs), k(features), w_bf16(bf16_copies), w_f32(f32_copies) {
    const size_t w_count = size_t(n) * k, x_count = size_t(m) * k;
    for (int c = 0; c < bf16_copies; ++c) {
      CHECK_CUDA(cudaMalloc(&w_bf16[c], w_count * 2));
      fillBf16Exact<<<1024, 256>>>(w_bf16[c], nullptr, w_count, 17 + c);
    }
    for (int c = 0; c < f32_copies; ++c) {
      CHECK_CUDA(cudaMalloc(&w_f32[c], w_count * 4));
      fillBf16Exact<<<1024, 256>>>(nullptr, w_f32[c], w_count, 17 + c);
    }
    CHECK_CUDA(cudaMalloc(&x_bf16, x_count * 2));
    CHECK_CUDA(cudaMalloc(&x_f32, x_count * 4));
    CHECK_CUDA(cudaMalloc(&y, size_t(m) * n * 4));
    fillBf16Exact<<<1024, 256>>>(x_bf16, x_f32, x_count, 99);
    CHECK_CUDA(cudaDeviceSynchronize());
  }
  DeviceLinearProblem(const DeviceLinearProblem&) = delete;
  DeviceLinearProblem& operator=(const DeviceLinearProblem&) = delete;
  ~DeviceLinearProblem() {
    for (auto* w : w_bf16)
      CHECK_CUDA(cudaFree(w));
    for (auto* w : w_f32)
      CHECK_CUDA(cudaFree(w));
    CHECK_CUDA(cudaFree(x_bf16));
    CHECK_CUDA(cudaFree(x_f32));
    CHECK_CUDA(cudaFree(y));
  }

  // REE's arguments: bf16 x, the first bf16 copy of w, fp32 y, dense.
  repops::LinearArgs args() const {
    repops::LinearArgs a;
    a.x = x_bf16;
    a.x_dtype = DType::kBF16;
    a.w = w_bf16[0];
    a.w_dtype = DType::kBF16;
    a.y = y;
    a.y_dtype = DType::kF32;
    a.m = m;
    a.n = n;
    a.k = k;
    return a;
  }
};

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
