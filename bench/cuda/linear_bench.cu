// Linear layer benchmark: REE's reproducible GEMV/GEMM beside cuBLAS in the same run.
//
// Decode (M = 1, 4, 8, 16; bf16 weights): time, effective bandwidth (weights + x + y bytes), its
// share of the device's measured D2D copy bandwidth (cudaMemcpy D2D, read + write counted), and
// cuBLAS GemmEx (bf16 inputs, fp32 compute; tensor cores) and SGEMM (fp32) times. Weights rotate
// over enough copies to exceed the L2 cache, so every call streams them from memory. "ours" is
// the issue's comparison (bf16 x, no early weight loads); "model path" is the call the runtime
// makes (fp32 x, w_is_constant: weight loads start before the previous call has finished).
// Prefill (4096^3 and M x K x N = 8192 x 4096 x 14336): TFLOP/s beside the same cuBLAS calls.
// Usage: bench_gpu_linear_bench [iterations]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda/linear_bench_util.cuh"
#include "ree/kernels/linear.h"

namespace {

using ree::bench::copyBandwidthGBs;
using ree::bench::timeMs;

struct Problem {
  int m, k, n;
  bool decode;
};

void run(const Problem& p, int iterations, double copy_gbs, cublasHandle_t cublas, int l2_bytes) {
  size_t w_count = size_t(p.n) * p.k, x_count = size_t(p.m) * p.k, y_count = size_t(p.m) * p.n;
  // Enough weight copies that a rotation through them does not fit in L2 (decode only).
  int copies =
      p.decode ? std::max<int>(1, static_cast<int>((3.0 * l2_bytes) / (w_count * 2) + 1)) : 1;
  // fp32 weights for SGEMM: one copy for prefill, rotated copies for decode when memory allows.
  int f32_copies =
      p.decode ? std::max(1, static_cast<int>((3.0 * l2_bytes) / (w_count * 4) + 1)) : 1;
  ree::bench::DeviceLinearProblem problem(p.m, p.n, p.k, copies, f32_copies);
  ree::repops::LinearArgs args = problem.args();
  float ours = timeMs(iterations, [&](int i) {
    args.w = problem.w_bf16[i % copies];
    CHECK_REE(ree::repops::cuda::linear(args, nullptr));
  });
  // The model's own decode path: fp32 activations (the reproducible set keeps them in fp32) and
  // weights marked constant, as runtime/src/reproducible_ops.cpp passes them, so that each call's
  // first weight loads start while the previous call finishes.
  float ours_x32 = 0.0f;
  if (p.decode) {
    ree::repops::LinearArgs args32 = args;
    args32.x = problem.x_f32;
    args32.x_dtype = ree::DType::kF32;
    args32.w_is_constant = true;
    ours_x32 = timeMs(iterations, [&](int i) {
      args32.w = problem.w_bf16[i % copies];
      CHECK_REE(ree::repops::cuda::linear(args32, nullptr));
    });
  }
  float gemm_ex = timeMs(iterations, [&](int i) {
    ree::bench::cublasBf16Linear(cublas, p.m, p.n, p.k, problem.w_bf16[i % copies], problem.x_bf16,
                                 problem.y);
  });
  float sgemm = timeMs(iterations, [&](int i) {
    ree::bench::cublasF32Linear(cublas, p.m, p.n, p.k, problem.w_f32[i % f32_copies], problem.x_f32,
                                problem.y);
  });
  double flops = 2.0 * p.m * p.n * double(p.k);
  if (p.decode) {
    double bytes = w_count * 2.0 + x_count * 2.0 + y_count * 4.0;
    double gbs = bytes / (ours * 1e-3) / 1e9;
    double gbs32 = (w_count * 2.0 + x_count * 4.0 + y_count * 4.0) / (ours_x32 * 1e-3) / 1e9;
    std::printf(
        "decode  M=%-5d K=%-6d N=%-6d ours %9.2f us %7.0f GB/s (%5.1f%% of copy) | "
        "cublas bf16 %9.2f us (ours/cublas speed %.2fx) | sgemm f32 %9.2f us (%.2fx) | "
        "model path (x fp32, constant w) %9.2f us (%5.1f%% of copy)\n",
        p.m, p.k, p.n, ours * 1e3, gbs, 100.0 * gbs / copy_gbs, gemm_ex * 1e3, gemm_ex / ours,
        sgemm * 1e3, sgemm / ours, ours_x32 * 1e3, 100.0 * gbs32 / copy_gbs);
  } else {
    std::printf(
        "prefill M=%-5d K=%-6d N=%-6d ours %9.2f ms %6.1f TFLOP/s | cublas bf16 %8.2f ms "
        "%6.1f TFLOP/s (%.2fx) | sgemm f32 %8.2f ms %6.1f TFLOP/s (%.2fx)\n",
        p.m, p.k, p.n, ours, flops / (ours * 1e-3) / 1e12, gemm_ex, flops / (gemm_ex * 1e-3) / 1e12,
        gemm_ex / ours, sgemm, flops / (sgemm * 1e-3) / 1e12, sgemm / ours);
  }
  std::fflush(stdout);
}

// Batched decode (17 to 128 rows of x, the model path: fp32 x, constant bf16 weights): the
// GEMV's row blocks against the GEMM's 128 x 128 tiles, side by side; kAuto picks the GEMV up to
// kernels/src/cuda/linear.cu's kAutoGemvMaxRows.
void batchedDecode(int m, int k, int n, int iterations, int l2_bytes) {
  size_t w_count = size_t(n) * k;
  int copies = std::max<int>(1, static_cast<int>((3.0 * l2_bytes) / (w_count * 2) + 1));
  ree::bench::DeviceLinearProblem problem(m, n, k, copies, 1);
  ree::repops::LinearArgs args = problem.args();
  args.x = problem.x_f32;
  args.x_dtype = ree::DType::kF32;
  args.w_is_constant = true;
  auto timeKernel = [&](ree::repops::cuda::LinearKernel kernel) {
    return timeMs(iterations, [&](int i) {
      args.w = problem.w_bf16[i % copies];
      CHECK_REE(ree::repops::cuda::linearWithKernel(args, kernel, nullptr));
    });
  };
  const float gemv = timeKernel(ree::repops::cuda::LinearKernel::kGemv);
  const float gemm = timeKernel(ree::repops::cuda::LinearKernel::kGemm);
  const float chosen = timeKernel(ree::repops::cuda::LinearKernel::kAuto);
  std::printf(
      "batched decode M=%-4d K=%-6d N=%-6d gemv rows %9.2f us | gemm tiles %9.2f us | gemv/gemm "
      "speed %.2fx | auto %9.2f us\n",
      m, k, n, gemv * 1e3, gemm * 1e3, gemm / gemv, chosen * 1e3);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  ree::bench::LinearBenchContext context(argc, argv);
  const cudaDeviceProp& prop = context.prop;
  const int iterations = context.iterations;
  double copy_gbs = copyBandwidthGBs();
  std::printf("device %s, %d SMs, L2 %d MiB; D2D copy bandwidth (read+write) %.0f GB/s\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, copy_gbs);
  std::printf(
      "ours: bf16 weights, bf16 x, fp32 y (reproducible, fp32 FFMA); cublas bf16: GemmEx "
      "bf16 in, fp32 compute (tensor cores, not reproducible); sgemm: fp32 in\n");
  auto decode = [&](int m, int k, int n) {
    run({m, k, n, true}, iterations, copy_gbs, context.cublas, prop.l2CacheSize);
  };
  for (auto& shape : ree::bench::kLlamaProjections) {
    for (int m : {1, 4, 8, 16})
      decode(m, shape[0], shape[1]);
  }
  // Llama-3-8B's fused decode projections: q|k|v (N = 6144), gate|up (N = 28672), lm_head.
  const int model_shapes[3][2] = {{4096, 6144}, {4096, 28672}, {4096, 128256}};
  for (auto& shape : model_shapes) {
    for (int m : {1, 8})
      decode(m, shape[0], shape[1]);
  }
  for (auto& shape : ree::bench::kLlamaProjections) {
    for (int m : {32, 64, 96, 128})
      batchedDecode(m, shape[0], shape[1], std::max(3, iterations / 4), prop.l2CacheSize);
  }
  run({4096, 4096, 4096, false}, std::max(3, iterations / 4), copy_gbs, context.cublas,
      prop.l2CacheSize);
  run({8192, 4096, 14336, false}, std::max(3, iterations / 8), copy_gbs, context.cublas,
      prop.l2CacheSize);
  return 0;
}
