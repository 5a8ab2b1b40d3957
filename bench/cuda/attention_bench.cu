// Attention throughput, measured in one run beside its baseline (CUDA events, median of N):
//   decode: GB/s of KV-cache reads (bf16 K+V, 32 q heads / 8 KV heads, head_dim 128, context 4096)
//           for batch 1, 4, 8, 16, against cudaMemcpy device-to-device bandwidth (read + write);
//   prefill: 2048 new tokens of one sequence, TFLOP/s (4 * head_dim flops per (query head, key)
//            pair of the causal triangle: q.k and p.v, one fma = 2 flops), for the prefill
//            kernels side by side (the chunk kernel that the tiled one replaced, the tiled one with
//            64-row tiles, the tiled default; their outputs are compared bitwise, exit status 1
//            if they differ).
// Decode is timed two ways: one call at a time between two events (the latency of a call,
// including the entry point's host work: work lists, table upload, launches), and 20 calls back
// to back between two events (the stream's throughput when the host runs ahead of the GPU, as in
// a decode step; host work shows only where it is the longer), each call reading another region
// of a KV cache larger than the L2 cache, so that no call finds its K and V there.
// Baseline beside each figure (when LibTorch is found): ATen's scaled_dot_product_attention on
// bf16 q, k, v of the same shapes (enable_gqa, contiguous K/V rotated over as many sets as our
// cache regions), timed the same two ways; "speed" ratios are ATen's time over ours.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../../kernels/src/cuda/attention_variant.h"
#include "ree/kernels/attention.h"
#if REE_BENCH_HAVE_ATEN
#include "cuda/aten_sdpa.h"
#endif

namespace {

using ree::repops::cuda::PrefillKernel;

#define BENCH_CHECK(call)                                                       \
  do {                                                                          \
    cudaError_t err_ = (call);                                                  \
    if (err_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(err_)); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

// Milliseconds per call of `calls` calls of fn(i) issued back to back between two events (median
// of `repeats` such runs, after warm-up).
float backToBackMs(const std::function<void(int)>& fn, int calls, int repeats) {
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i)
    fn(i);
  BENCH_CHECK(cudaDeviceSynchronize());
  std::vector<float> times;
  for (int r = 0; r < repeats; ++r) {
    BENCH_CHECK(cudaEventRecord(start));
    for (int i = 0; i < calls; ++i)
      fn(i);
    BENCH_CHECK(cudaEventRecord(stop));
    BENCH_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms / calls);
  }
  BENCH_CHECK(cudaEventDestroy(start));
  BENCH_CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Median milliseconds of `iterations` timed calls of fn (after warm-up).
float medianMs(const std::function<void()>& fn, int iterations) {
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i)
    fn();
  BENCH_CHECK(cudaDeviceSynchronize());
  std::vector<float> times;
  for (int i = 0; i < iterations; ++i) {
    BENCH_CHECK(cudaEventRecord(start));
    fn();
    BENCH_CHECK(cudaEventRecord(stop));
    BENCH_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  BENCH_CHECK(cudaEventDestroy(start));
  BENCH_CHECK(cudaEventDestroy(stop));
  return times[times.size() / 2];
}

__global__ void fillBits(uint16_t* data, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    // bf16 in [-2, 2): sign, exponent 126..127, random mantissa.
    data[i] = uint16_t((h & 0x8000u) | ((126u + ((h >> 8) & 1u)) << 7) | (h & 0x7fu));
  }
}

struct Setup {
  int n_heads = 32, n_kv_heads = 8, head_dim = 128;
  int block_size = 16;
};

void runAttention(const Setup& setup, int batch, int cached, int n_new, void* q, void* out, void* k,
                  void* v, int max_blocks, const std::vector<int32_t>& offsets,
                  const std::vector<int32_t>& cached_lens) {
  ree::repops::AttentionArgs args;
  args.batch = batch;
  args.query_offsets = offsets.data();
  args.cached_lens = cached_lens.data();
  args.n_heads = setup.n_heads;
  args.n_kv_heads = setup.n_kv_heads;
  args.head_dim = setup.head_dim;
  args.q = q;
  args.q_dtype = ree::DType::kBF16;
  args.out = out;
  args.out_dtype = ree::DType::kBF16;
  args.cache.k = k;
  args.cache.v = v;
  args.cache.dtype = ree::DType::kBF16;
  args.cache.num_blocks = batch * max_blocks;
  args.cache.block_size = setup.block_size;
  args.cache.max_blocks_per_seq = max_blocks;
  (void)cached;
  (void)n_new;
  if (ree::repops::cuda::attention(args, nullptr) != ree::Status::kSuccess) {
    std::fprintf(stderr, "attention failed: %s\n", ree::lastErrorMessage());
    std::exit(1);
  }
}

#if REE_BENCH_HAVE_ATEN
// ATen's SDPA on `shape`, timed as our calls are: one call (median) and back to back (rotating
// over the K/V sets). Returns false, after printing why, if ATen fails.
bool timeAten(const bench::AtenSdpaShape& shape, float* one_call_ms, float* stream_ms,
              std::string* backend) {
  std::string error;
  std::unique_ptr<bench::AtenSdpa> aten = bench::AtenSdpa::create(shape, &error);
  bool ok = aten != nullptr;
  if (ok) {
    *backend = aten->backend();
    ok = aten->run(0, &error);
    BENCH_CHECK(cudaDeviceSynchronize());
  }
  if (!ok) {
    std::printf("    ATen SDPA: not measured (%s)\n", error.c_str());
    return false;
  }
  auto call = [&](int i) {
    if (!aten->run(i, &error)) {
      std::fprintf(stderr, "ATen SDPA failed: %s\n", error.c_str());
      std::exit(1);
    }
  };
  *one_call_ms = medianMs([&] { call(0); }, 50);
  if (stream_ms) *stream_ms = backToBackMs(call, 20, 11);
  return true;
}
#endif

}  // namespace

int main() {
  int device = 0;
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf("device: %s\n", prop.name);

  // Baseline: device-to-device copy of 1 GiB, bytes read + written per second.
  const size_t copy_bytes = size_t(1) << 30;
  void *copy_src = nullptr, *copy_dst = nullptr;
  BENCH_CHECK(cudaMalloc(&copy_src, copy_bytes));
  BENCH_CHECK(cudaMalloc(&copy_dst, copy_bytes));
  const float copy_ms = medianMs(
      [&] {
        BENCH_CHECK(cudaMemcpyAsync(copy_dst, copy_src, copy_bytes, cudaMemcpyDeviceToDevice));
      },
      20);
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
  std::printf("cudaMemcpy D2D: %.1f GB/s (read+write)\n", copy_gbs);
  BENCH_CHECK(cudaFree(copy_src));
  BENCH_CHECK(cudaFree(copy_dst));

  Setup setup;
  const int context = 4096;
  const int max_batch = 16;
  const int max_blocks = context / setup.block_size;
  const size_t kv_elems =
      size_t(max_batch) * max_blocks * setup.block_size * setup.n_kv_heads * setup.head_dim;
  const size_t q_elems = size_t(2048) * setup.n_heads * setup.head_dim;
  uint16_t *k = nullptr, *v = nullptr, *q = nullptr, *out = nullptr;
  BENCH_CHECK(cudaMalloc(&k, kv_elems * 2));
  BENCH_CHECK(cudaMalloc(&v, kv_elems * 2));
  BENCH_CHECK(cudaMalloc(&q, q_elems * 2));
  BENCH_CHECK(cudaMalloc(&out, q_elems * 2));
  fillBits<<<1024, 256>>>(k, kv_elems, 1);
  fillBits<<<1024, 256>>>(v, kv_elems, 2);
  fillBits<<<1024, 256>>>(q, q_elems, 3);
  BENCH_CHECK(cudaDeviceSynchronize());

  std::printf("decode (context %d, %d/%d heads, head_dim %d, bf16 KV, block_size %d):\n", context,
              setup.n_heads, setup.n_kv_heads, setup.head_dim, setup.block_size);
  for (int batch : {1, 4, 8, 16}) {
    std::vector<int32_t> offsets(batch + 1), cached(batch, context - 1);
    for (int s = 0; s <= batch; ++s)
      offsets[s] = s;
    const float ms = medianMs(
        [&] {
          runAttention(setup, batch, context - 1, 1, q, out, k, v, max_blocks, offsets, cached);
        },
        50);
    const double kv_bytes = 2.0 * batch * context * setup.n_kv_heads * setup.head_dim * 2;
    const double gbs = kv_bytes / (ms * 1e-3) / 1e9;
    // Back to back: call i reads region i % regions of the cache (max_batch / batch regions of
    // `batch` sequences each; 268 MB in all, over five times the L2 cache of an H100).
    const int regions = max_batch / batch;
    const size_t region_elems = kv_elems / regions;
    const float stream_ms = backToBackMs(
        [&](int i) {
          const size_t offset = size_t(i % regions) * region_elems;
          runAttention(setup, batch, context - 1, 1, q, out, k + offset, v + offset, max_blocks,
                       offsets, cached);
        },
        20, 11);
    const double stream_gbs = kv_bytes / (stream_ms * 1e-3) / 1e9;
    std::printf(
        "  batch %2d: one call %8.1f us  %7.1f GB/s KV reads  = %5.1f%% of D2D copy;  back to back "
        "%8.1f us/call  %7.1f GB/s  = %5.1f%%\n",
        batch, ms * 1e3, gbs, 100.0 * gbs / copy_gbs, stream_ms * 1e3, stream_gbs,
        100.0 * stream_gbs / copy_gbs);
#if REE_BENCH_HAVE_ATEN
    bench::AtenSdpaShape shape;
    shape.batch = batch;
    shape.n_heads = setup.n_heads;
    shape.n_kv_heads = setup.n_kv_heads;
    shape.head_dim = setup.head_dim;
    shape.q_len = 1;
    shape.kv_len = context;
    shape.sets = regions;
    float aten_ms = 0.0f, aten_stream_ms = 0.0f;
    std::string backend;
    if (timeAten(shape, &aten_ms, &aten_stream_ms, &backend)) {
      const double aten_gbs = kv_bytes / (aten_stream_ms * 1e-3) / 1e9;
      std::printf(
          "    ATen SDPA (%s): one call %8.1f us (ours/ATen speed %.2fx);  back to back %8.1f "
          "us/call  %7.1f GB/s  = %5.1f%% (ours/ATen speed %.2fx)\n",
          backend.c_str(), aten_ms * 1e3, aten_ms / ms, aten_stream_ms * 1e3, aten_gbs,
          100.0 * aten_gbs / copy_gbs, aten_stream_ms / stream_ms);
    }
#endif
  }

  const int prefill = 2048;
  std::vector<int32_t> offsets = {0, prefill}, cached = {0};
  const double pairs = double(prefill) * (prefill + 1) / 2.0;  // causal (query, key) pairs
  const double flops = 4.0 * setup.head_dim * setup.n_heads * pairs;
  // Both prefill kernels (same bits, checked here on the benchmark's data): the tiled one (the
  // default) and the chunk kernel's flash mode it replaced.
  const size_t out_bytes = size_t(prefill) * setup.n_heads * setup.head_dim * 2;
  std::vector<std::vector<unsigned char>> outputs;
  float ms = 0.0f;
  for (PrefillKernel kernel :
       {PrefillKernel::kChunk, PrefillKernel::kTiledRows64, PrefillKernel::kTiled}) {
    ree::repops::cuda::setPrefillKernelForBenchmark(kernel);
    BENCH_CHECK(cudaMemset(out, 0xff, out_bytes));
    ms = medianMs(
        [&] { runAttention(setup, 1, 0, prefill, q, out, k, v, max_blocks, offsets, cached); }, 10);
    outputs.emplace_back(out_bytes);
    BENCH_CHECK(cudaMemcpy(outputs.back().data(), out, out_bytes, cudaMemcpyDeviceToHost));
    std::printf(
        "prefill %d tokens (%d/%d heads, head_dim %d), %s kernel: %.3f ms  %.2f TFLOP/s (fp32 "
        "FFMA)\n",
        prefill, setup.n_heads, setup.n_kv_heads, setup.head_dim,
        kernel == PrefillKernel::kTiled         ? "tiled"
        : kernel == PrefillKernel::kTiledRows64 ? "tiled, 64-row tiles"
                                                : "chunk (before)",
        ms, flops / (ms * 1e-3) / 1e12);
  }
  const bool same_bits = outputs[0] == outputs[1] && outputs[0] == outputs[2];
  std::printf("    tiled (both tile sizes) == chunk kernel output, bitwise: %s\n",
              same_bits ? "yes" : "NO");
#if REE_BENCH_HAVE_ATEN
  {
    bench::AtenSdpaShape shape;
    shape.n_heads = setup.n_heads;
    shape.n_kv_heads = setup.n_kv_heads;
    shape.head_dim = setup.head_dim;
    shape.q_len = prefill;
    shape.kv_len = prefill;
    float aten_ms = 0.0f;
    std::string backend;
    if (timeAten(shape, &aten_ms, nullptr, &backend)) {
      std::printf(
          "    ATen SDPA (%s, bf16, causal): %.3f ms  %.2f TFLOP/s (ours/ATen speed "
          "%.3fx)\n",
          backend.c_str(), aten_ms, flops / (aten_ms * 1e-3) / 1e12, aten_ms / ms);
    }
  }
#else
  std::printf("    ATen SDPA: not built (no LibTorch)\n");
#endif

  BENCH_CHECK(cudaFree(k));
  BENCH_CHECK(cudaFree(v));
  BENCH_CHECK(cudaFree(q));
  BENCH_CHECK(cudaFree(out));
  return same_bits ? 0 : 1;
}
