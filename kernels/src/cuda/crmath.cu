// CUDA batch API of the correctly rounded math (crmath.h): one thread per element, grid-stride.
#include "common/crmath_args.h"
#include "ree/core/cuda_check.h"
#include "ree/kernels/crmath.h"
#include "ree/kernels/math_ops.h"

namespace ree::repops::cuda {
namespace {

template <int Op>
__device__ __forceinline__ float applyOp(float x) {
  switch (static_cast<UnaryMathOp>(Op)) {
    case UnaryMathOp::kExp:
      return crExp(x);
    case UnaryMathOp::kExpm1:
      return crExpm1(x);
    case UnaryMathOp::kLog:
      return crLog(x);
    case UnaryMathOp::kLog1p:
      return crLog1p(x);
    case UnaryMathOp::kTanh:
      return crTanh(x);
    case UnaryMathOp::kErf:
      return crErf(x);
    case UnaryMathOp::kSin:
      return crSin(x);
    case UnaryMathOp::kCos:
      return crCos(x);
    case UnaryMathOp::kRsqrt:
      return crRsqrt(x);
    case UnaryMathOp::kSigmoid:
      return crSigmoid(x);
    case UnaryMathOp::kSilu:
      return crSilu(x);
    case UnaryMathOp::kGeluErf:
      return crGeluErf(x);
    case UnaryMathOp::kGeluTanh:
      return crGeluTanh(x);
    case UnaryMathOp::kSoftplus:
      return crSoftplus(x);
  }
  return x;
}

template <int Op>
__global__ void unaryMathKernel(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = applyOp<Op>(in[i]);
  }
}

template <int Op>
Status launch(const float* in, float* out, int64_t n, cudaStream_t stream) {
  constexpr int kThreads = 256;
  long long blocks = (n + kThreads - 1) / kThreads;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  unaryMathKernel<Op><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(in, out, n);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

}  // namespace

Status unaryMath(UnaryMathOp op, const float* in, float* out, int64_t n, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateUnaryMathArgs(op, in, out, n));
  if (n == 0) return Status::kSuccess;
  switch (op) {
    case UnaryMathOp::kExp:
      return launch<0>(in, out, n, stream);
    case UnaryMathOp::kExpm1:
      return launch<1>(in, out, n, stream);
    case UnaryMathOp::kLog:
      return launch<2>(in, out, n, stream);
    case UnaryMathOp::kLog1p:
      return launch<3>(in, out, n, stream);
    case UnaryMathOp::kTanh:
      return launch<4>(in, out, n, stream);
    case UnaryMathOp::kErf:
      return launch<5>(in, out, n, stream);
    case UnaryMathOp::kSin:
      return launch<6>(in, out, n, stream);
    case UnaryMathOp::kCos:
      return launch<7>(in, out, n, stream);
    case UnaryMathOp::kRsqrt:
      return launch<8>(in, out, n, stream);
    case UnaryMathOp::kSigmoid:
      return launch<9>(in, out, n, stream);
    case UnaryMathOp::kSilu:
      return launch<10>(in, out, n, stream);
    case UnaryMathOp::kGeluErf:
      return launch<11>(in, out, n, stream);
    case UnaryMathOp::kGeluTanh:
      return launch<12>(in, out, n, stream);
    case UnaryMathOp::kSoftplus:
      return launch<13>(in, out, n, stream);
  }
  return REE_FAIL(Status::kInvalidArgument, "unaryMath: unknown op %d", static_cast<int>(op));
}

}  // namespace ree::repops::cuda
