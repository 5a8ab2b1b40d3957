// Row-wise RepOps bandwidth on the GPU against cudaMemcpy D2D measured in the same run.
// For each op and LLM shape: median time over repeats (CUDA events), effective GB/s counting the
// bytes the op must move (read x once + write y once, + weight), and the fraction of the
// device-to-device copy bandwidth (a copy of N bytes moves 2N: read + write) of a cudaMemcpy of the
// shape's x bytes, timed in the same run just before the shape's ops (the "copy" line).
// Inputs are varied finite values (a hash of the index scaled to [-8, 8]; weights in [0.5, 1.5]):
// equal elements would flatter softmax and the norms.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "ree/kernels/rowops.h"

namespace {

using namespace ree;
using repops::RowsIn;
using repops::RowsOut;
using repops::VecIn;

#define BENCH_CUDA(call)                                                      \
  do {                                                                        \
    cudaError_t e_ = (call);                                                  \
    if (e_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_)); \
      return 1;                                                               \
    }                                                                         \
  } while (0)

// x[i] = lo + (hi - lo) * u(i) in `dtype`, u a hash of i in [0, 1).
__global__ void fillValues(void* x, DType dtype, size_t count, float lo, float hi) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    const float u = static_cast<float>(h >> 40) * 0x1p-24f;
    repops::rowmath::storeAt(x, dtype, static_cast<int64_t>(i), lo + (hi - lo) * u);
  }
}

// Median milliseconds of `body` over `repeats` timed launches (after warm-up).
float medianMs(const std::function<void()>& body, int repeats = 21) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int i = 0; i < 3; ++i)
    body();
  std::vector<float> times;
  for (int i = 0; i < repeats; ++i) {
    cudaEventRecord(start);
    body();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main() {
  int device = 0;
  cudaDeviceProp prop;
  BENCH_CUDA(cudaGetDeviceProperties(&prop, device));
  std::printf("device: %s\n", prop.name);

  const size_t max_bytes = size_t{4096} * 128256 * 4;  // enough for every shape below
  void *x = nullptr, *y = nullptr, *w = nullptr;
  BENCH_CUDA(cudaMalloc(&x, max_bytes));
  BENCH_CUDA(cudaMalloc(&y, max_bytes));
  BENCH_CUDA(cudaMalloc(&w, 128256 * 4));

  // Copy bandwidth: 256 MiB D2D copy, bytes read + written.
  const size_t copy_bytes = size_t{256} << 20;
  float copy_ms = medianMs([&] { cudaMemcpyAsync(y, x, copy_bytes, cudaMemcpyDeviceToDevice); });
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
  std::printf("cudaMemcpy D2D 256 MiB: %.1f GB/s (read+write)\n\n", copy_gbs);
  std::printf("%-12s %-6s %6s %7s %10s %10s %8s\n", "op", "dtype", "rows", "cols", "us", "GB/s",
              "of copy");

  struct Shape {
    int64_t rows, cols;
  };
  std::vector<Shape> shapes;
  for (int64_t cols : {4096, 8192}) {
    for (int64_t rows : {1, 16, 128, 1024, 4096})
      shapes.push_back({rows, cols});
  }
  for (int64_t rows : {1, 8, 64, 512})
    shapes.push_back({rows, 128256});

  for (DType dtype : {DType::kBF16, DType::kF32}) {
    fillValues<<<1024, 256>>>(x, dtype, max_bytes / dtypeSize(dtype), -8.0f, 8.0f);
    fillValues<<<64, 256>>>(w, dtype, 128256, 0.5f, 1.5f);
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaDeviceSynchronize());
    for (const Shape& s : shapes) {
      const int64_t rows = s.rows, cols = s.cols;
      const double elem = dtypeSize(dtype);
      const double rw_bytes = 2.0 * rows * cols * elem;
      RowsIn in{x, dtype, cols};
      RowsOut out{y, dtype, cols};
      struct Op {
        const char* name;
        double bytes;
        std::function<Status()> run;
      };
      std::vector<Op> ops = {
          {"rmsNorm", rw_bytes + cols * elem,
           [&] {
             return repops::cuda::rmsNorm(in, VecIn{w, dtype}, out, rows, cols, 1e-6f,
                                          repops::RmsNormVariant::kCastBeforeWeight, nullptr);
           }},
          {"layerNorm", rw_bytes + 2 * cols * elem,
           [&] {
             return repops::cuda::layerNorm(in, VecIn{w, dtype}, VecIn{w, dtype}, out, rows, cols,
                                            1e-5f, nullptr);
           }},
          {"softmax", rw_bytes,
           [&] { return repops::cuda::softmax(in, out, rows, cols, nullptr); }},
          {"logSoftmax", rw_bytes,
           [&] { return repops::cuda::logSoftmax(in, out, rows, cols, nullptr); }},
          {"sum", rw_bytes / 2,
           [&] {
             return repops::cuda::reduceRows(repops::ReduceOp::kSum, in, y, DType::kF32, rows, cols,
                                             nullptr);
           }},
          {"mean", rw_bytes / 2,
           [&] {
             return repops::cuda::reduceRows(repops::ReduceOp::kMean, in, y, DType::kF32, rows,
                                             cols, nullptr);
           }},
          {"var", rw_bytes / 2,
           [&] {
             return repops::cuda::reduceRows(repops::ReduceOp::kVar, in, y, DType::kF32, rows, cols,
                                             nullptr);
           }},
          {"max", rw_bytes / 2,
           [&] {
             return repops::cuda::reduceRows(repops::ReduceOp::kMax, in, y, DType::kF32, rows, cols,
                                             nullptr);
           }},
          {"min", rw_bytes / 2,
           [&] {
             return repops::cuda::reduceRows(repops::ReduceOp::kMin, in, y, DType::kF32, rows, cols,
                                             nullptr);
           }},
          {"argmax", rw_bytes / 2,
           [&] {
             return repops::cuda::argmaxRows(in, static_cast<int32_t*>(y), rows, cols, nullptr);
           }},
          {"cast", rows * cols * (elem + (dtype == DType::kBF16 ? 4 : 2)),
           [&] {
             return repops::cuda::cast(
                 in, RowsOut{y, dtype == DType::kBF16 ? DType::kF32 : DType::kBF16, cols}, rows,
                 cols, nullptr);
           }},
      };
      // The same bytes as x, copied: the baseline of this shape's "of copy" column.
      const float shape_copy_ms =
          medianMs([&] { cudaMemcpyAsync(y, x, rw_bytes / 2, cudaMemcpyDeviceToDevice); });
      const double shape_copy_gbs = rw_bytes / (shape_copy_ms * 1e-3) / 1e9;
      std::printf("%-12s %-6s %6lld %7lld %10.2f %10.1f %7.0f%%\n", "copy", dtypeName(dtype),
                  static_cast<long long>(rows), static_cast<long long>(cols), shape_copy_ms * 1e3,
                  shape_copy_gbs, 100.0);
      for (const Op& op : ops) {
        if (op.run() != Status::kSuccess) {
          std::fprintf(stderr, "%s failed: %s\n", op.name, lastErrorMessage());
          return 1;
        }
        BENCH_CUDA(cudaDeviceSynchronize());
        float ms = medianMs([&] { op.run(); });
        double gbs = op.bytes / (ms * 1e-3) / 1e9;
        std::printf("%-12s %-6s %6lld %7lld %10.2f %10.1f %7.0f%%\n", op.name, dtypeName(dtype),
                    static_cast<long long>(rows), static_cast<long long>(cols), ms * 1e3, gbs,
                    100.0 * gbs / shape_copy_gbs);
      }
    }
  }
  cudaFree(x);
  cudaFree(y);
  cudaFree(w);
  return 0;
}
