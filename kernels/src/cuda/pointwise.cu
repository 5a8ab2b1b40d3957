// CUDA embedding gather and elementwise operators (docs/repops-spec/pointwise.md). Same
// arithmetic as the CPU: pointwise.h.
#include <climits>

#include "chained_launch.cuh"
#include "cuda_check.cuh"
#include "ree/kernels/pointwise.h"

namespace ree::repops::cuda {
namespace {

constexpr int kThreads = 256;

bool knownDType(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
}

bool knownActivation(Activation activation) {
  return activation == Activation::kSilu || activation == Activation::kGeluErf ||
         activation == Activation::kGeluTanh;
}

unsigned gridFor(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65536 * 8 ? blocks : 65536 * 8);
}

// Copies rows in `Word` units (16, 4 or 2 bytes; chosen by alignment). A bad id zeroes its row
// and lowers *first_bad to its position.
template <typename Word>
__global__ void embeddingKernel(const Word* table, int64_t vocab, int64_t row_words,
                                const int32_t* ids, int64_t count, Word* out,
                                unsigned long long* first_bad) {
  waitForPredecessor();
  allowSuccessorLaunch();
  const int64_t total = count * row_words;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t position = k / row_words;
    const int64_t column = k - position * row_words;
    const int32_t id = ids[position];
    if (id < 0 || id >= vocab) {
      out[k] = Word{};
      if (column == 0 && first_bad != nullptr) {
        atomicMin(first_bad, static_cast<unsigned long long>(position));
      }
    } else {
      out[k] = table[static_cast<int64_t>(id) * row_words + column];
    }
  }
}

template <typename Word>
Status launchEmbedding(const void* table, int64_t vocab, int64_t row_bytes, const int32_t* ids,
                       int64_t count, void* out, unsigned long long* first_bad,
                       cudaStream_t stream) {
  const int64_t row_words = row_bytes / static_cast<int64_t>(sizeof(Word));
  launchChained(embeddingKernel<Word>, gridFor(count * row_words), kThreads, 0, stream,
                static_cast<const Word*>(table), vocab, row_words, ids, count,
                static_cast<Word*>(out), first_bad);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

enum class BinaryOp { kAdd, kMul };

template <typename T, BinaryOp kOp>
__global__ void binaryKernel(const T* a, const T* b, T* out, int64_t n) {
  waitForPredecessor();
  allowSuccessorLaunch();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = kOp == BinaryOp::kAdd ? addElement(a[i], b[i]) : mulElement(a[i], b[i]);
  }
}

template <typename T>
__global__ void activationKernel(Activation activation, const T* x, T* out, int64_t n) {
  waitForPredecessor();
  allowSuccessorLaunch();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = activationElement(activation, x[i]);
  }
}

template <typename T>
__global__ void gatedKernel(Activation activation, const T* gate, int64_t gate_stride, const T* up,
                            int64_t up_stride, T* out, int64_t out_stride, int64_t rows,
                            int64_t cols) {
  waitForPredecessor();
  allowSuccessorLaunch();
  const int64_t total = rows * cols;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = k / cols;
    const int64_t c = k - r * cols;
    out[r * out_stride + c] =
        gatedElement(activation, gate[r * gate_stride + c], up[r * up_stride + c]);
  }
}

template <BinaryOp kOp>
Status binary(const char* name, DType dtype, const void* a, const void* b, void* out, int64_t n,
              cudaStream_t stream) {
  REE_CHECK_ARG(knownDType(dtype), "%s: unknown dtype %d", name, static_cast<int>(dtype));
  REE_CHECK_ARG(n >= 0, "%s: n must be >= 0, got %lld", name, static_cast<long long>(n));
  if (n == 0) return Status::kSuccess;
  REE_CHECK_ARG(a && b && out, "%s: null pointer (a=%p b=%p out=%p)", name, a, b, out);
  switch (dtype) {
    case DType::kF32:
      launchChained(binaryKernel<float, kOp>, gridFor(n), kThreads, 0, stream,
                    static_cast<const float*>(a), static_cast<const float*>(b),
                    static_cast<float*>(out), n);
      break;
    case DType::kBF16:
      launchChained(binaryKernel<bf16_t, kOp>, gridFor(n), kThreads, 0, stream,
                    static_cast<const bf16_t*>(a), static_cast<const bf16_t*>(b),
                    static_cast<bf16_t*>(out), n);
      break;
    case DType::kF16:
      launchChained(binaryKernel<f16_t, kOp>, gridFor(n), kThreads, 0, stream,
                    static_cast<const f16_t*>(a), static_cast<const f16_t*>(b),
                    static_cast<f16_t*>(out), n);
      break;
  }
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

bool aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

}  // namespace

Status embedding(DType dtype, const void* table, int64_t vocab, int64_t dim, const int32_t* ids,
                 int64_t count, void* out, cudaStream_t stream) {
  REE_CHECK_ARG(knownDType(dtype), "embedding: unknown dtype %d", static_cast<int>(dtype));
  REE_CHECK_ARG(
      vocab > 0 && dim > 0 && count >= 0, "embedding: bad shape vocab=%lld dim=%lld count=%lld",
      static_cast<long long>(vocab), static_cast<long long>(dim), static_cast<long long>(count));
  if (count == 0) return Status::kSuccess;
  REE_CHECK_ARG(table && ids && out, "embedding: null pointer (table=%p ids=%p out=%p)", table,
                static_cast<const void*>(ids), out);
  const int64_t row_bytes = dim * dtypeSize(dtype);
  unsigned long long* first_bad = nullptr;
  REE_CUDA_CHECK(cudaMallocAsync(&first_bad, sizeof(*first_bad), stream));
  Status status = Status::kSuccess;
  cudaError_t err = cudaMemsetAsync(first_bad, 0xff, sizeof(*first_bad), stream);
  if (err == cudaSuccess) {
    if (row_bytes % 16 == 0 && aligned(table, 16) && aligned(out, 16)) {
      status = launchEmbedding<uint4>(table, vocab, row_bytes, ids, count, out, first_bad, stream);
    } else if (row_bytes % 4 == 0 && aligned(table, 4) && aligned(out, 4)) {
      status =
          launchEmbedding<uint32_t>(table, vocab, row_bytes, ids, count, out, first_bad, stream);
    } else {
      status =
          launchEmbedding<uint16_t>(table, vocab, row_bytes, ids, count, out, first_bad, stream);
    }
  }
  unsigned long long bad_position = ULLONG_MAX;
  int32_t bad_id = 0;
  if (err == cudaSuccess && status == Status::kSuccess) {
    err = cudaMemcpyAsync(&bad_position, first_bad, sizeof(bad_position), cudaMemcpyDeviceToHost,
                          stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    if (err == cudaSuccess && bad_position != ULLONG_MAX) {
      err = cudaMemcpy(&bad_id, ids + bad_position, sizeof(bad_id), cudaMemcpyDeviceToHost);
    }
  }
  cudaError_t free_err = cudaFreeAsync(first_bad, stream);
  REE_CUDA_CHECK(err);
  REE_RETURN_IF_ERROR(status);
  REE_CUDA_CHECK(free_err);
  REE_CHECK_ARG(bad_position == ULLONG_MAX,
                "embedding: ids[%llu] = %d is outside the vocabulary [0, %lld) (device check; "
                "its output row was zeroed)",
                bad_position, bad_id, static_cast<long long>(vocab));
  return Status::kSuccess;
}

Status embeddingHostChecked(DType dtype, const void* table, int64_t vocab, int64_t dim,
                            const int32_t* ids, const int32_t* host_ids, int64_t count, void* out,
                            cudaStream_t stream) {
  REE_CHECK_ARG(knownDType(dtype), "embedding: unknown dtype %d", static_cast<int>(dtype));
  REE_CHECK_ARG(
      vocab > 0 && dim > 0 && count >= 0, "embedding: bad shape vocab=%lld dim=%lld count=%lld",
      static_cast<long long>(vocab), static_cast<long long>(dim), static_cast<long long>(count));
  if (count == 0) return Status::kSuccess;
  REE_CHECK_ARG(table && ids && host_ids && out,
                "embedding: null pointer (table=%p ids=%p host_ids=%p out=%p)", table,
                static_cast<const void*>(ids), static_cast<const void*>(host_ids), out);
  for (int64_t i = 0; i < count; ++i) {  // the CPU kernel's check and message
    REE_CHECK_ARG(host_ids[i] >= 0 && host_ids[i] < vocab,
                  "embedding: ids[%lld] = %d is outside the vocabulary [0, %lld)",
                  static_cast<long long>(i), host_ids[i], static_cast<long long>(vocab));
  }
  const int64_t row_bytes = dim * dtypeSize(dtype);
  if (row_bytes % 16 == 0 && aligned(table, 16) && aligned(out, 16)) {
    return launchEmbedding<uint4>(table, vocab, row_bytes, ids, count, out, nullptr, stream);
  }
  if (row_bytes % 4 == 0 && aligned(table, 4) && aligned(out, 4)) {
    return launchEmbedding<uint32_t>(table, vocab, row_bytes, ids, count, out, nullptr, stream);
  }
  return launchEmbedding<uint16_t>(table, vocab, row_bytes, ids, count, out, nullptr, stream);
}

Status add(DType dtype, const void* a, const void* b, void* out, int64_t n, cudaStream_t stream) {
  return binary<BinaryOp::kAdd>("add", dtype, a, b, out, n, stream);
}

Status mul(DType dtype, const void* a, const void* b, void* out, int64_t n, cudaStream_t stream) {
  return binary<BinaryOp::kMul>("mul", dtype, a, b, out, n, stream);
}

Status activation(Activation activation, DType dtype, const void* x, void* out, int64_t n,
                  cudaStream_t stream) {
  REE_CHECK_ARG(knownDType(dtype), "activation: unknown dtype %d", static_cast<int>(dtype));
  REE_CHECK_ARG(knownActivation(activation), "activation: unknown kind %d",
                static_cast<int>(activation));
  REE_CHECK_ARG(n >= 0, "activation: n must be >= 0, got %lld", static_cast<long long>(n));
  if (n == 0) return Status::kSuccess;
  REE_CHECK_ARG(x && out, "activation: null pointer (x=%p out=%p)", x, out);
  switch (dtype) {
    case DType::kF32:
      launchChained(activationKernel<float>, gridFor(n), kThreads, 0, stream, activation,
                    static_cast<const float*>(x), static_cast<float*>(out), n);
      break;
    case DType::kBF16:
      launchChained(activationKernel<bf16_t>, gridFor(n), kThreads, 0, stream, activation,
                    static_cast<const bf16_t*>(x), static_cast<bf16_t*>(out), n);
      break;
    case DType::kF16:
      launchChained(activationKernel<f16_t>, gridFor(n), kThreads, 0, stream, activation,
                    static_cast<const f16_t*>(x), static_cast<f16_t*>(out), n);
      break;
  }
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

Status gated(Activation activation, DType dtype, const void* gate, int64_t gate_stride,
             const void* up, int64_t up_stride, void* out, int64_t out_stride, int64_t rows,
             int64_t cols, cudaStream_t stream) {
  REE_CHECK_ARG(knownDType(dtype), "gated: unknown dtype %d", static_cast<int>(dtype));
  REE_CHECK_ARG(knownActivation(activation), "gated: unknown activation %d",
                static_cast<int>(activation));
  REE_CHECK_ARG(rows >= 0 && cols >= 0, "gated: bad shape rows=%lld cols=%lld",
                static_cast<long long>(rows), static_cast<long long>(cols));
  REE_CHECK_ARG(gate_stride >= cols && up_stride >= cols && out_stride >= cols,
                "gated: strides (gate %lld, up %lld, out %lld) must be >= cols %lld",
                static_cast<long long>(gate_stride), static_cast<long long>(up_stride),
                static_cast<long long>(out_stride), static_cast<long long>(cols));
  if (rows == 0 || cols == 0) return Status::kSuccess;
  REE_CHECK_ARG(gate && up && out, "gated: null pointer (gate=%p up=%p out=%p)", gate, up, out);
  const int64_t total = rows * cols;
  switch (dtype) {
    case DType::kF32:
      launchChained(gatedKernel<float>, gridFor(total), kThreads, 0, stream, activation,
                    static_cast<const float*>(gate), gate_stride, static_cast<const float*>(up),
                    up_stride, static_cast<float*>(out), out_stride, rows, cols);
      break;
    case DType::kBF16:
      launchChained(gatedKernel<bf16_t>, gridFor(total), kThreads, 0, stream, activation,
                    static_cast<const bf16_t*>(gate), gate_stride, static_cast<const bf16_t*>(up),
                    up_stride, static_cast<bf16_t*>(out), out_stride, rows, cols);
      break;
    case DType::kF16:
      launchChained(gatedKernel<f16_t>, gridFor(total), kThreads, 0, stream, activation,
                    static_cast<const f16_t*>(gate), gate_stride, static_cast<const f16_t*>(up),
                    up_stride, static_cast<f16_t*>(out), out_stride, rows, cols);
      break;
  }
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

}  // namespace ree::repops::cuda
