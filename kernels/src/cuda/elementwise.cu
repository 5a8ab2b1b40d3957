// CUDA element-wise RepOps (elementwise.h): one thread per element, grid-stride, the element
// functions the CPU calls.
#include <cstring>

#include "common/elementwise_args.h"
#include "ree/core/cuda_check.h"
#include "ree/kernels/elementwise.h"

namespace ree::repops::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocksFor(int64_t n) {
  long long blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks > (1 << 20) ? (1 << 20) : blocks);
}

__global__ void binaryKernel(BinaryOp op, const float* a, const float* b, float* out, int64_t n) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = elementwise::binaryValue(op, a[i], b[i]);
  }
}

__global__ void unaryKernel(SimpleUnaryOp op, const float* x, float* out, int64_t n) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = elementwise::unaryValue(op, x[i]);
  }
}

__global__ void whereKernel(const uint8_t* condition, const float* a, const float* b, float* out,
                            int64_t n) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = elementwise::whereValue(condition[i], a[i], b[i]);
  }
}

template <typename T>
__global__ void gatherKernel(const T* in, const int64_t* index, T* out, int64_t n, T fill) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const int64_t source = index[i];
    out[i] = source >= 0 ? in[source] : fill;
  }
}

template <typename T>
Status launchGather(const void* in, const int64_t* index, void* out, int64_t n, uint64_t fill,
                    cudaStream_t stream) {
  T fill_value;
  memcpy(&fill_value, &fill, sizeof(T));
  gatherKernel<T><<<blocksFor(n), kThreads, 0, stream>>>(static_cast<const T*>(in), index,
                                                         static_cast<T*>(out), n, fill_value);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

}  // namespace

Status gather(int elem_bytes, const void* in, const int64_t* index, void* out, int64_t n,
              uint64_t fill, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateElementwiseArgs("gather", 0, 1, in, index, out, out, n));
  REE_CHECK_ARG(elem_bytes == 1 || elem_bytes == 4 || elem_bytes == 8,
                "gather: elem_bytes %d (1, 4 or 8)", elem_bytes);
  if (n == 0) return Status::kSuccess;
  if (elem_bytes == 1) return launchGather<uint8_t>(in, index, out, n, fill, stream);
  if (elem_bytes == 4) return launchGather<uint32_t>(in, index, out, n, fill, stream);
  return launchGather<uint64_t>(in, index, out, n, fill, stream);
}

Status binary(BinaryOp op, const float* a, const float* b, float* out, int64_t n,
              cudaStream_t stream) {
  REE_RETURN_IF_ERROR(
      validateElementwiseArgs("binary", static_cast<int>(op), kBinaryOpCount, a, b, b, out, n));
  if (n == 0) return Status::kSuccess;
  binaryKernel<<<blocksFor(n), kThreads, 0, stream>>>(op, a, b, out, n);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

Status simpleUnary(SimpleUnaryOp op, const float* x, float* out, int64_t n, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateElementwiseArgs("simpleUnary", static_cast<int>(op),
                                              kSimpleUnaryOpCount, x, x, x, out, n));
  if (n == 0) return Status::kSuccess;
  unaryKernel<<<blocksFor(n), kThreads, 0, stream>>>(op, x, out, n);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

Status where(const uint8_t* condition, const float* a, const float* b, float* out, int64_t n,
             cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateElementwiseArgs("where", 0, 1, condition, a, b, out, n));
  if (n == 0) return Status::kSuccess;
  whereKernel<<<blocksFor(n), kThreads, 0, stream>>>(condition, a, b, out, n);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

}  // namespace ree::repops::cuda
