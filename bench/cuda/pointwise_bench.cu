// Bandwidth of RoPE, SwiGLU and embedding gather against cudaMemcpy device-to-device, measured
// in the same run on the same GPU. GB/s counts bytes read + bytes written (memcpy: 2 x size).
#include <cuda_runtime.h>

#include <cstdio>
#include <functional>
#include <vector>

#include "ree/kernels/pointwise.h"
#include "ree/kernels/rope.h"

namespace {

#define CHECK_CUDA(call)                                                        \
  do {                                                                          \
    cudaError_t err_ = (call);                                                  \
    if (err_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(err_)); \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

// Median-free simple timing: warm up, then average over `iterations` launches.
double millisecondsPerCall(const std::function<void()>& call, int iterations = 50) {
  for (int i = 0; i < 3; ++i)
    call();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  for (int i = 0; i < iterations; ++i)
    call();
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / iterations;
}

void report(const char* name, double bytes, double ms, double baseline_gbs) {
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  std::printf("%-34s %10.3f ms %9.1f GB/s  %5.1f%% of memcpy D2D\n", name, ms, gbs,
              100.0 * gbs / baseline_gbs);
}

}  // namespace

int main() {
  using namespace ree;
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s\n", prop.name);

  const size_t copy_bytes = size_t(1) << 30;
  void *src = nullptr, *dst = nullptr;
  CHECK_CUDA(cudaMalloc(&src, copy_bytes));
  CHECK_CUDA(cudaMalloc(&dst, copy_bytes));
  CHECK_CUDA(cudaMemset(src, 0, copy_bytes));
  const double copy_ms = millisecondsPerCall(
      [&] { cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice); }, 20);
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
  std::printf("%-34s %10.3f ms %9.1f GB/s  (read + write)\n", "cudaMemcpy D2D 1 GiB", copy_ms,
              copy_gbs);

  // RoPE: prefill of 8192 tokens, 32 query heads of 128 (bf16), llama3 frequencies, in place.
  {
    const int64_t tokens = 8192;
    const int heads = 32, dim = 128;
    std::vector<int32_t> positions(tokens);
    for (int64_t t = 0; t < tokens; ++t)
      positions[t] = static_cast<int32_t>(t);
    int32_t* dpos = nullptr;
    float* dinv = nullptr;
    CHECK_CUDA(cudaMalloc(&dpos, tokens * sizeof(int32_t)));
    CHECK_CUDA(cudaMalloc(&dinv, dim / 2 * sizeof(float)));
    CHECK_CUDA(
        cudaMemcpy(dpos, positions.data(), tokens * sizeof(int32_t), cudaMemcpyHostToDevice));
    RopeLlama3Scaling scaling;
    if (repops::cuda::ropeInvFreq(500000.0f, dim, &scaling, dinv, nullptr) != Status::kSuccess) {
      std::fprintf(stderr, "ropeInvFreq: %s\n", lastErrorMessage());
      return 1;
    }
    const double bytes = 2.0 * tokens * heads * dim * 2;
    const double ms = millisecondsPerCall([&] {
      repops::cuda::rope(DType::kBF16, src, tokens, heads, dim, heads * dim, dpos, dinv, dim,
                         RopeLayout::kHalfSplit, nullptr);
    });
    report("rope bf16 8192x32x128 (half-split)", bytes, ms, copy_gbs);
    cudaFree(dpos);
    cudaFree(dinv);
  }

  // SwiGLU: 4096 tokens x 14336 (Llama 3 8B MLP), bf16, gate and up halves of a fused buffer.
  {
    const int64_t rows = 4096, cols = 14336;
    const double bytes = 3.0 * rows * cols * 2;
    const auto* fused = static_cast<const bf16_t*>(src);
    const double ms = millisecondsPerCall([&] {
      repops::cuda::gated(Activation::kSilu, DType::kBF16, fused, 2 * cols, fused + cols, 2 * cols,
                          dst, cols, rows, cols, nullptr);
    });
    report("swiglu bf16 4096x14336", bytes, ms, copy_gbs);
  }

  // Embedding: 8192 ids into a 128256 x 4096 bf16 table (1 GiB: ids land anywhere).
  {
    const int64_t vocab = 128256, dim = 4096, count = 8192;
    void* table = nullptr;
    CHECK_CUDA(cudaMalloc(&table, vocab * dim * 2));
    CHECK_CUDA(cudaMemset(table, 0, vocab * dim * 2));
    std::vector<int32_t> ids(count);
    for (int64_t i = 0; i < count; ++i)
      ids[i] = static_cast<int32_t>((i * 7919) % vocab);
    int32_t* dids = nullptr;
    CHECK_CUDA(cudaMalloc(&dids, count * sizeof(int32_t)));
    CHECK_CUDA(cudaMemcpy(dids, ids.data(), count * sizeof(int32_t), cudaMemcpyHostToDevice));
    const double bytes = 2.0 * count * dim * 2;
    const double ms = millisecondsPerCall([&] {
      repops::cuda::embedding(DType::kBF16, table, vocab, dim, dids, count, dst, nullptr);
    });
    report("embedding bf16 8192 x 4096 (+sync)", bytes, ms, copy_gbs);
    cudaFree(table);
    cudaFree(dids);
  }
  cudaFree(src);
  cudaFree(dst);
  return 0;
}
