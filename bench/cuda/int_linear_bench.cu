// repops-2 (integer, int8 tensor cores) linear beside repops-1 (fp32 FFMA), cuBLAS SGEMM and
// cuBLAS bf16 GemmEx, in one run: effective TFLOP/s = 2 M N K / time at M = 1, 64, 2048, 8192 on
// the Llama-3-8B projections (K x N = 4096 x 4096, 4096 x 14336, 14336 x 4096), bf16 x and w,
// fp32 y, plus the share of repops-2's time spent in its two quantisation kernels (x and w to
// int8 slice planes; w is quantised on every call in this first version).
// Usage: bench_gpu_int_linear_bench [iterations]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "cuda/linear_bench_util.cuh"
#include "ree/kernels/int_linear.h"
#include "ree/kernels/linear.h"

namespace {

using ree::bench::timeMs;

void run(int m, int k, int n, int iterations, cublasHandle_t cublas) {
  size_t w_count = size_t(n) * k, x_count = size_t(m) * k, y_count = size_t(m) * n;
  uint16_t *w_bf16, *x_bf16;
  float *w_f32, *x_f32, *y;
  CHECK_CUDA(cudaMalloc(&w_bf16, w_count * 2));
  CHECK_CUDA(cudaMalloc(&w_f32, w_count * 4));
  CHECK_CUDA(cudaMalloc(&x_bf16, x_count * 2));
  CHECK_CUDA(cudaMalloc(&x_f32, x_count * 4));
  CHECK_CUDA(cudaMalloc(&y, y_count * 4));
  ree::bench::fillBf16Exact<<<1024, 256>>>(w_bf16, w_f32, w_count, 17);
  ree::bench::fillBf16Exact<<<1024, 256>>>(x_bf16, x_f32, x_count, 99);
  CHECK_CUDA(cudaDeviceSynchronize());

  ree::repops::LinearArgs args;
  args.x = x_bf16;
  args.x_dtype = ree::DType::kBF16;
  args.w = w_bf16;
  args.w_dtype = ree::DType::kBF16;
  args.y = y;
  args.y_dtype = ree::DType::kF32;
  args.m = m;
  args.n = n;
  args.k = k;
  // Large problems run fewer times (repops-1 takes ~25 ms at 8192 x 14336 x 4096).
  const double flops = 2.0 * m * n * double(k);
  const int reps = std::max(2, std::min(iterations, static_cast<int>(2e13 / flops)));
  const int warmup = 2;
  float ours = timeMs(
      reps, [&](int) { CHECK_REE(ree::repops::cuda::intLinear(args, nullptr)); }, warmup);
  float quant = timeMs(
      reps, [&](int) { CHECK_REE(ree::repops::cuda::intLinearQuantizeOnly(args, nullptr)); },
      warmup);
  float repops1 = timeMs(
      reps, [&](int) { CHECK_REE(ree::repops::cuda::linear(args, nullptr)); }, warmup);
  float gemm_ex = timeMs(
      reps, [&](int) { ree::bench::cublasBf16Linear(cublas, m, n, k, w_bf16, x_bf16, y); }, warmup);
  float sgemm = timeMs(
      reps, [&](int) { ree::bench::cublasF32Linear(cublas, m, n, k, w_f32, x_f32, y); }, warmup);
  auto tflops = [&](float ms) { return flops / (ms * 1e-3) / 1e12; };
  std::printf(
      "M=%-5d K=%-6d N=%-6d | repops-2 %9.3f ms %7.1f TFLOP/s (quantise %4.1f%%) | repops-1 "
      "%9.3f ms %6.1f | cublas sgemm %8.3f ms %6.1f | cublas bf16 %8.3f ms %6.1f | "
      "repops-2 vs repops-1 %.2fx, vs sgemm %.2fx, vs bf16 %.2fx\n",
      m, k, n, ours, tflops(ours), 100.0 * quant / ours, repops1, tflops(repops1), sgemm,
      tflops(sgemm), gemm_ex, tflops(gemm_ex), repops1 / ours, sgemm / ours, gemm_ex / ours);
  std::fflush(stdout);
  CHECK_CUDA(cudaFree(w_bf16));
  CHECK_CUDA(cudaFree(w_f32));
  CHECK_CUDA(cudaFree(x_bf16));
  CHECK_CUDA(cudaFree(x_f32));
  CHECK_CUDA(cudaFree(y));
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = argc > 1 ? std::atoi(argv[1]) : 20;
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs; bf16 x and w, fp32 y; TFLOP/s = 2MNK / time\n", prop.name,
              prop.multiProcessorCount);
  cublasHandle_t cublas;
  CHECK_CUBLAS(cublasCreate(&cublas));
  const int shapes[3][2] = {{4096, 4096}, {4096, 14336}, {14336, 4096}};  // K x N
  for (int m : {1, 64, 2048, 8192}) {
    for (auto& shape : shapes)
      run(m, shape[0], shape[1], iterations, cublas);
  }
  CHECK_CUBLAS(cublasDestroy(cublas));
  return 0;
}
