// repops-3 (one exponent per row, four int8 class GEMMs on cuBLASLt for prefill, a skinny mma
// kernel for decode) beside repops-2, repops-1, cuBLAS SGEMM, cuBLAS bf16 GemmEx and one plain
// cuBLAS int8 GEMM of the same M, N, K (the ceiling of a single int8 product), in one run:
// effective TFLOP/s = 2 M N K / time, bf16 x and w, fp32 y. repops-3 is timed unprepared (w's row
// exponents found per call) and prepared (prepareIntLinearRowWeights and w_is_constant, as a
// model's weights are). For M <= 64 the weights rotate through copies that exceed L2, and the w
// read rate (2 bytes per parameter) is given beside the device's D2D copy bandwidth (read + write).
// Usage: bench_gpu_int_linear_row_bench [iterations] [max_m] [kernels [M,K,N]] (max_m: only shapes
// with M <= max_m; "kernels": the decode-side kernels side by side at batched-decode shapes
// instead, or at the one shape M,K,N)
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/linear_bench_util.cuh"
#include "ree/kernels/int_linear.h"
#include "ree/kernels/int_linear_row.h"
#include "ree/kernels/linear.h"

namespace {

using ree::bench::copyBandwidthGBs;
using ree::bench::timeMs;

__global__ void fillInt8(int8_t* data, size_t count, uint32_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    data[i] = static_cast<int8_t>(h & 0xff);
  }
}

// One plain int8 GEMM (int32 out) of the same shape on cuBLAS, w copies rotated; < 0 when cuBLAS
// refuses the shape (int8 needs aligned dimensions).
float cublasInt8Ms(cublasHandle_t cublas, int m, int n, int k, int copies, int reps) {
  std::vector<int8_t*> w(copies);
  int8_t* x = nullptr;
  int32_t* y = nullptr;
  for (auto& p : w) {
    CHECK_CUDA(cudaMalloc(&p, size_t(n) * k));
    fillInt8<<<1024, 256>>>(p, size_t(n) * k, 5);
  }
  CHECK_CUDA(cudaMalloc(&x, size_t(m) * k));
  CHECK_CUDA(cudaMalloc(&y, size_t(m) * n * 4));
  fillInt8<<<1024, 256>>>(x, size_t(m) * k, 7);
  const int32_t alpha = 1, beta = 0;
  auto call = [&](int i) {
    return cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w[i % copies], CUDA_R_8I,
                        k, x, CUDA_R_8I, k, &beta, y, CUDA_R_32I, n, CUBLAS_COMPUTE_32I,
                        CUBLAS_GEMM_DEFAULT);
  };
  float ms = -1.0f;
  if (call(0) == CUBLAS_STATUS_SUCCESS) {
    ms = timeMs(reps, [&](int i) { CHECK_CUBLAS(call(i)); });
  }
  for (auto* p : w)
    CHECK_CUDA(cudaFree(p));
  CHECK_CUDA(cudaFree(x));
  CHECK_CUDA(cudaFree(y));
  return ms;
}

// A problem whose bf16 w rotates through `copies` copies (at decode sizes more than L2 holds),
// each with its prepared row exponents; timed(call) runs call(copy) with args.w on that copy.
struct RotatedProblem {
  RotatedProblem(int m, int n, int k, int copies, int f32_copies, int iterations)
      : problem(m, n, k, copies, f32_copies),
        args(problem.args()),
        copies(copies),
        flops(2.0 * m * n * double(k)),
        reps(std::max(3, std::min(iterations, static_cast<int>(2e13 / flops)))),
        prepared(copies) {
    for (int c = 0; c < copies; ++c) {
      args.w = problem.w_bf16[c];
      CHECK_REE(ree::repops::cuda::prepareIntLinearRowWeights(args, nullptr, &prepared[c]));
    }
  }
  template <typename Call>
  float timed(Call&& call) {
    return timeMs(reps, [&](int i) {
      args.w = problem.w_bf16[i % copies];
      call(i % copies);
    });
  }
  ree::bench::DeviceLinearProblem problem;
  ree::repops::LinearArgs args;
  int copies;
  double flops;
  int reps;
  std::vector<std::unique_ptr<ree::repops::cuda::IntLinearRowDeviceWeights>> prepared;
};

void run(int m, int k, int n, int iterations, double copy_gbs, cublasHandle_t cublas,
         int l2_bytes) {
  const bool decode = m <= 64;
  const size_t w_count = size_t(n) * k;
  const int copies =
      decode ? std::max<int>(1, static_cast<int>((3.0 * l2_bytes) / (w_count * 2) + 1)) : 1;
  const int f32_copies =
      decode ? std::max<int>(1, static_cast<int>((3.0 * l2_bytes) / (w_count * 4) + 1)) : 1;
  RotatedProblem rotated(m, n, k, copies, f32_copies, iterations);
  ree::bench::DeviceLinearProblem& problem = rotated.problem;
  ree::repops::LinearArgs& args = rotated.args;
  auto& prepared = rotated.prepared;
  const double flops = rotated.flops;
  const int reps = rotated.reps;
  auto timed = [&](auto&& call) { return rotated.timed(call); };
  float row = timed([&](int) { CHECK_REE(ree::repops::cuda::intLinearRow(args, nullptr)); });
  // The model path: prepared row exponents and w marked constant (chained launch).
  float row_prepared = timed([&](int c) {
    ree::repops::LinearArgs model = args;
    model.w_is_constant = true;
    CHECK_REE(ree::repops::cuda::intLinearRow(model, prepared[c].get(), nullptr));
  });
  float repops2 = timed([&](int) { CHECK_REE(ree::repops::cuda::intLinear(args, nullptr)); });
  float repops1 = timed([&](int) { CHECK_REE(ree::repops::cuda::linear(args, nullptr)); });
  float bf16 = timed([&](int c) {
    ree::bench::cublasBf16Linear(cublas, m, n, k, problem.w_bf16[c], problem.x_bf16, problem.y);
  });
  float sgemm = timeMs(reps, [&](int i) {
    ree::bench::cublasF32Linear(cublas, m, n, k, problem.w_f32[i % f32_copies], problem.x_f32,
                                problem.y);
  });
  const int int8_copies =
      decode ? std::max<int>(1, static_cast<int>((3.0 * l2_bytes) / w_count + 1)) : 1;
  float int8 = cublasInt8Ms(cublas, m, n, k, int8_copies, reps);
  auto tf = [&](float ms) { return ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0; };
  std::printf(
      "M=%-5d K=%-6d N=%-6d | repops-3 %8.3f ms %6.1f TFLOP/s, prepared %8.3f ms %6.1f | "
      "repops-2 %8.3f ms %6.1f | repops-1 %8.3f ms %6.1f | sgemm %8.3f ms %6.1f | bf16 %8.3f ms "
      "%6.1f | int8 %8.3f ms %6.1f TOPS | prepared repops-3 vs repops-2 %.2fx, repops-1 %.2fx, "
      "sgemm %.2fx, bf16 %.2fx, int8 %.2fx\n",
      m, k, n, row, tf(row), row_prepared, tf(row_prepared), repops2, tf(repops2), repops1,
      tf(repops1), sgemm, tf(sgemm), bf16, tf(bf16), int8, tf(int8), repops2 / row_prepared,
      repops1 / row_prepared, sgemm / row_prepared, bf16 / row_prepared, int8 / row_prepared);
  if (decode) {
    auto gbs = [&](float ms) { return w_count * 2.0 / (ms * 1e-3) / 1e9; };
    std::printf(
        "      w read (2 B/param): repops-3 %6.0f GB/s (%5.1f%% of copy), prepared %6.0f GB/s "
        "(%5.1f%%) | repops-2 %6.0f GB/s | repops-1 %6.0f GB/s (%5.1f%%) | bf16 %6.0f GB/s "
        "(%5.1f%%)\n",
        gbs(row), 100.0 * gbs(row) / copy_gbs, gbs(row_prepared),
        100.0 * gbs(row_prepared) / copy_gbs, gbs(repops2), gbs(repops1),
        100.0 * gbs(repops1) / copy_gbs, gbs(bf16), 100.0 * gbs(bf16) / copy_gbs);
  }
  std::fflush(stdout);
}

// The decode-side kernels of repops-3 side by side (prepared weights, w constant, as in a model)
// with repops-1 and cuBLAS bf16: one line per shape, ms and TFLOP/s; "-" where a kernel cannot
// serve the shape.
void runKernels(int m, int k, int n, int iterations, cublasHandle_t cublas, int l2_bytes) {
  using ree::repops::cuda::IntLinearRowKernel;
  const size_t w_count = size_t(n) * k;
  const int copies = std::max<int>(1, static_cast<int>((3.0 * l2_bytes) / (w_count * 2) + 1));
  RotatedProblem rotated(m, n, k, copies, 1, iterations);
  ree::bench::DeviceLinearProblem& problem = rotated.problem;
  ree::repops::LinearArgs& args = rotated.args;
  args.w_is_constant = true;
  auto& prepared = rotated.prepared;
  const double flops = rotated.flops;
  auto timed = [&](auto&& call) { return rotated.timed(call); };
  auto tf = [&](float ms) { return ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0; };
  std::printf("M=%-4d K=%-6d N=%-6d |", m, k, n);
  const std::pair<const char*, IntLinearRowKernel> kernels[] = {
      {"decode", IntLinearRowKernel::kDecode},
      {"skinny", IntLinearRowKernel::kSkinny},
      {"tiled", IntLinearRowKernel::kTiled},
      {"gemm", IntLinearRowKernel::kGemm},
      {"auto", IntLinearRowKernel::kAuto}};
  for (const auto& entry : kernels) {
    const char* name = entry.first;
    const IntLinearRowKernel kernel = entry.second;
    args.w = problem.w_bf16[0];
    if (ree::repops::cuda::intLinearRowWithKernel(args, prepared[0].get(), kernel, nullptr) !=
        ree::Status::kSuccess) {
      std::printf(" %s -", name);
      continue;
    }
    const float ms = timed([&](int c) {
      CHECK_REE(
          ree::repops::cuda::intLinearRowWithKernel(args, prepared[c].get(), kernel, nullptr));
    });
    std::printf(" %s %.3f ms %.1f |", name, ms, tf(ms));
  }
  const float repops1 = timed([&](int) { CHECK_REE(ree::repops::cuda::linear(args, nullptr)); });
  const float bf16 = timed([&](int c) {
    ree::bench::cublasBf16Linear(cublas, m, n, k, problem.w_bf16[c], problem.x_bf16, problem.y);
  });
  std::printf(" repops-1 %.3f ms %.1f | cuBLAS bf16 %.3f ms %.1f TFLOP/s\n", repops1, tf(repops1),
              bf16, tf(bf16));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  ree::bench::LinearBenchContext context(argc, argv);
  const double copy_gbs = copyBandwidthGBs();
  std::printf(
      "device %s, %d SMs, L2 %d MiB; D2D copy bandwidth (read+write) %.0f GB/s; bf16 x and w, "
      "fp32 y; TFLOP/s = 2MNK / time\n",
      context.prop.name, context.prop.multiProcessorCount, context.prop.l2CacheSize >> 20,
      copy_gbs);
  // M = 128 and 256: the GEMM path just above the skinny kernel's 64 rows (where they cross).
  const int shapes[][3] = {{8192, 4096, 14336}, {8192, 14336, 4096}, {2048, 4096, 4096},
                           {256, 4096, 14336},  {128, 4096, 14336},  {64, 4096, 14336},
                           {16, 4096, 4096},    {1, 4096, 4096},     {1, 4096, 14336},
                           {1, 14336, 4096}};
  // argv[2]: only the shapes with M at most this (e.g. 1: the decode rows).
  const int max_m = argc > 2 ? std::atoi(argv[2]) : 1 << 30;
  // argv[3] == "kernels": the decode-side kernels side by side at batched-decode shapes instead;
  // argv[4] "M,K,N": that shape only (for a profiler).
  if (argc > 3 && std::string(argv[3]) == "kernels") {
    int one[3] = {0, 0, 0};
    if (argc > 4 && std::sscanf(argv[4], "%d,%d,%d", &one[0], &one[1], &one[2]) == 3) {
      runKernels(one[0], one[1], one[2], context.iterations, context.cublas,
                 context.prop.l2CacheSize);
      return 0;
    }
    for (int m : {1, 8, 16, 32, 64, 128, 256}) {
      if (m > max_m) continue;
      for (const auto& kn : {std::pair{4096, 4096}, std::pair{4096, 14336}, std::pair{14336, 4096},
                             std::pair{4096, 6144}}) {
        runKernels(m, kn.first, kn.second, context.iterations, context.cublas,
                   context.prop.l2CacheSize);
      }
    }
    return 0;
  }
  for (auto& s : shapes) {
    if (s[0] > max_m) continue;
    run(s[0], s[1], s[2], context.iterations, copy_gbs, context.cublas, context.prop.l2CacheSize);
  }
  return 0;
}
