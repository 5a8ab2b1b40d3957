// CUDA element-wise RepOps (elementwise.h): one thread per element, grid-stride, the element
// functions the CPU calls.
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

}  // namespace

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
