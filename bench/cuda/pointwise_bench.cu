// Bandwidth of RoPE, SwiGLU, the residual add and embedding gather against cudaMemcpy
// device-to-device, measured in the same run on the same GPU. GB/s counts bytes read + bytes
// written (memcpy: 2 x size). Decode-sized RoPE calls report their time per call.
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

// GPU time per call: `calls` calls captured in one CUDA graph and replayed, so the host's launch
// cost (which bounds back-to-back launches of microsecond kernels) is not in the figure.
double microsecondsPerCallInGraph(const std::function<void(cudaStream_t)>& call, int calls = 100) {
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  for (int i = 0; i < calls; ++i)
    call(stream);
  cudaStreamEndCapture(stream, &graph);
  cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphLaunch(exec, stream);
  cudaStreamSynchronize(stream);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  const int replays = 10;
  cudaEventRecord(start, stream);
  for (int i = 0; i < replays; ++i)
    cudaGraphLaunch(exec, stream);
  cudaEventRecord(stop, stream);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  return 1e3 * ms / (replays * calls);
}

void report(const char* name, double bytes, double ms, double baseline_gbs) {
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  std::printf("%-38s %10.3f ms %9.1f GB/s  %5.1f%% of memcpy D2D\n", name, ms, gbs,
              100.0 * gbs / baseline_gbs);
}

// Finite, mostly non-zero bf16 values in [-4, 4] (a hash of the index): activations of zeros
// would take cheap paths that real inputs do not.
__global__ void fillBF16(ree::bf16_t* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    out[i] = ree::storeAs<ree::bf16_t>(static_cast<float>(h >> 8) * 0x1p-21f - 4.0f);
  }
}

// out[i] = float(in[i]) for i in [0, n).
__global__ void widenBF16(const ree::bf16_t* in, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = ree::loadFloat(in[i]);
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
  fillBF16<<<1024, 256>>>(static_cast<bf16_t*>(src), copy_bytes / 2);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemset(dst, 0, copy_bytes));
  const double copy_ms = millisecondsPerCall(
      [&] { cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice); }, 20);
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
  std::printf("%-38s %10.3f ms %9.1f GB/s  (read + write)\n", "cudaMemcpy D2D 1 GiB", copy_ms,
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
    // Decode: one token, the query (32 heads) and key (8 heads) calls of a Llama 3 8B layer.
    // Back-to-back launches (bounded by the host's launch rate as well) and GPU time per call.
    for (int decode_heads : {32, 8}) {
      auto decode = [&](cudaStream_t stream) {
        repops::cuda::rope(DType::kBF16, src, 1, decode_heads, dim, decode_heads * dim, dpos + 4000,
                           dinv, dim, RopeLayout::kHalfSplit, stream);
      };
      const double decode_ms = millisecondsPerCall([&] { decode(nullptr); }, 200);
      std::printf(
          "rope bf16 decode 1x%dx128 (half-split) %10.2f us per call, %.2f us GPU (graph)\n",
          decode_heads, decode_ms * 1e3, microsecondsPerCallInGraph(decode));
    }
    cudaFree(dpos);
    cudaFree(dinv);
  }

  // SwiGLU: 4096 tokens x 14336 (Llama 3 8B MLP), gate and up halves of a fused buffer
  // (refilled: the RoPE runs above rotated it in place). bf16 and f16 calls of this size look the
  // activation up in a table (pointwise.h, kActivationTableMinElements); 16 rows (a decode batch)
  // compute it. f32 is the reproducible model path's own (its activations are f32).
  {
    fillBF16<<<1024, 256>>>(static_cast<bf16_t*>(src), copy_bytes / 2);
    CHECK_CUDA(cudaGetLastError());
    const int64_t cols = 14336;
    struct Case {
      const char* name;
      Activation activation;
      DType dtype;
      int64_t rows;
    };
    const Case cases[] = {
        {"swiglu bf16 4096x14336", Activation::kSilu, DType::kBF16, 4096},
        {"geglu (tanh) bf16 4096x14336", Activation::kGeluTanh, DType::kBF16, 4096},
        {"swiglu bf16 16x14336 (computed)", Activation::kSilu, DType::kBF16, 16},
        {"swiglu f32 4096x14336", Activation::kSilu, DType::kF32, 4096},
    };
    for (const Case& c : cases) {
      // f32 gate/up values: the bf16 fill read as pairs would be mostly huge or NaN, so the f32
      // case widens the first half of the bf16 values into the second half of the buffer.
      const void* fused = src;
      if (c.dtype == DType::kF32) {
        const int64_t n = c.rows * 2 * cols;
        widenBF16<<<1024, 256>>>(static_cast<const bf16_t*>(src),
                                 static_cast<float*>(src) + n / 2 + n % 2, n);
        CHECK_CUDA(cudaGetLastError());
        fused = static_cast<float*>(src) + n / 2 + n % 2;
      }
      const size_t elem = c.dtype == DType::kF32 ? 4 : 2;
      const double bytes = 3.0 * c.rows * cols * elem;
      const auto* base = static_cast<const unsigned char*>(fused);
      const double ms = millisecondsPerCall([&] {
        repops::cuda::gated(c.activation, c.dtype, base, 2 * cols, base + cols * elem, 2 * cols,
                            dst, cols, c.rows, cols, nullptr);
      });
      report(c.name, bytes, ms, copy_gbs);
    }
  }

  // SiLU alone (ree.ops.silu): 4096 x 4096, f32 (its values widened from the bf16 fill) and bf16
  // (a call this large looks the activation up in the 16-bit table). The % column here is of a
  // cudaMemcpy D2D of the same bytes, timed just before.
  {
    fillBF16<<<1024, 256>>>(static_cast<bf16_t*>(src), copy_bytes / 2);
    const int64_t n = int64_t(4096) * 4096;
    auto* widened = static_cast<float*>(src) + n;  // past the bf16 values widenBF16 reads
    widenBF16<<<1024, 256>>>(static_cast<const bf16_t*>(src), widened, n);
    CHECK_CUDA(cudaGetLastError());
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      const size_t elem = dtype == DType::kF32 ? 4 : 2;
      const void* x = dtype == DType::kF32 ? static_cast<const void*>(widened) : src;
      const double bytes = 2.0 * n * elem;
      const double same_copy_ms = millisecondsPerCall(
          [&] { cudaMemcpyAsync(dst, x, n * elem, cudaMemcpyDeviceToDevice); }, 20);
      const double same_copy_gbs = bytes / (same_copy_ms * 1e-3) / 1e9;
      const bool f32 = dtype == DType::kF32;
      report(f32 ? "cudaMemcpy D2D 64 MiB" : "cudaMemcpy D2D 32 MiB", bytes, same_copy_ms,
             same_copy_gbs);
      const double ms = millisecondsPerCall(
          [&] { repops::cuda::activation(Activation::kSilu, dtype, x, dst, n, nullptr); });
      report(f32 ? "silu f32 4096x4096" : "silu bf16 4096x4096 (table)", bytes, ms, same_copy_gbs);
    }
  }

  // Residual add, in place as the runtime does it (acc += x): 8192 tokens x 4096, bf16.
  {
    const int64_t n = int64_t(8192) * 4096;
    const double bytes = 3.0 * n * 2;
    auto* acc = static_cast<bf16_t*>(dst);
    const auto* x = static_cast<const bf16_t*>(src);
    const double ms =
        millisecondsPerCall([&] { repops::cuda::add(DType::kBF16, acc, x, acc, n, nullptr); });
    report("add bf16 8192x4096 (in place)", bytes, ms, copy_gbs);
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
    // The runtime's decode variant: ids checked on the host, no synchronisation.
    const double host_checked_ms = millisecondsPerCall([&] {
      repops::cuda::embeddingHostChecked(DType::kBF16, table, vocab, dim, dids, ids.data(), count,
                                         dst, nullptr);
    });
    report("embedding bf16 8192 x 4096 (host ids)", bytes, host_checked_ms, copy_gbs);
    cudaFree(table);
    cudaFree(dids);
  }
  cudaFree(src);
  cudaFree(dst);
  return 0;
}
