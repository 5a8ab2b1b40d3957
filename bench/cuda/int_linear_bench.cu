// repops-2 (integer, int8 tensor cores) linear beside repops-1 (fp32 FFMA), cuBLAS SGEMM and
// cuBLAS bf16 GemmEx, in one run: effective TFLOP/s = 2 M N K / time at M = 1, 8, 64, 2048, 8192
// on the Llama-3-8B projections (K x N = 4096 x 4096, 4096 x 14336, 14336 x 4096), bf16 x and w,
// fp32 y, plus the share of repops-2's time spent in its quantisation kernels (x, and w for the
// GEMM, to int8 digit planes; the GEMV of M <= 4 quantises w on the fly, inside its own time).
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
  ree::bench::DeviceLinearProblem problem(m, n, k);
  const ree::repops::LinearArgs args = problem.args();
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
      reps,
      [&](int) {
        ree::bench::cublasBf16Linear(cublas, m, n, k, problem.w_bf16[0], problem.x_bf16, problem.y);
      },
      warmup);
  float sgemm = timeMs(
      reps,
      [&](int) {
        ree::bench::cublasF32Linear(cublas, m, n, k, problem.w_f32[0], problem.x_f32, problem.y);
      },
      warmup);
  auto tflops = [&](float ms) { return flops / (ms * 1e-3) / 1e12; };
  std::printf(
      "M=%-5d K=%-6d N=%-6d | repops-2 %9.3f ms %7.1f TFLOP/s (quantise %4.1f%%) | repops-1 "
      "%9.3f ms %6.1f | cublas sgemm %8.3f ms %6.1f | cublas bf16 %8.3f ms %6.1f | "
      "repops-2 vs repops-1 %.2fx, vs sgemm %.2fx, vs bf16 %.2fx\n",
      m, k, n, ours, tflops(ours), 100.0 * quant / ours, repops1, tflops(repops1), sgemm,
      tflops(sgemm), gemm_ex, tflops(gemm_ex), repops1 / ours, sgemm / ours, gemm_ex / ours);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  ree::bench::LinearBenchContext context(argc, argv);
  std::printf("device %s, %d SMs; bf16 x and w, fp32 y; TFLOP/s = 2MNK / time\n", context.prop.name,
              context.prop.multiProcessorCount);
  for (int m : {1, 8, 64, 2048, 8192}) {
    for (auto& shape : ree::bench::kLlamaProjections)
      run(m, shape[0], shape[1], context.iterations, context.cublas);
  }
  return 0;
}
