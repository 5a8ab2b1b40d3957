// CUDA batch API of the correctly rounded math (crmath.h). A thread maps kVector = 4 consecutive
// floats with one 16-byte load and one 16-byte store when both arrays are 16-byte aligned (else
// one float per thread): more bytes in flight per thread, and for exp, sigmoid and silu the four
// table paths of crExpN run side by side. Each element gets exactly the function of the CPU
// version (crExpN gives crExp's bits), so the grouping changes no bit.
#include <cstdint>

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

// kCount consecutive results. Exp, sigmoid and silu evaluate their exponentials with crExpN (the
// same bits as crExp, the table paths computed together); sigmoid and silu then do crSigmoid's
// and crSilu's float operations on them, in the same order.
template <int Op, int kCount>
__device__ __forceinline__ void applyOpN(const float (&x)[kCount], float (&y)[kCount]) {
  constexpr auto kOp = static_cast<UnaryMathOp>(Op);
  if constexpr (kOp == UnaryMathOp::kExp) {
    crExpN(x, y);
  } else if constexpr (kOp == UnaryMathOp::kSigmoid || kOp == UnaryMathOp::kSilu) {
    float minus_x[kCount];
#pragma unroll
    for (int j = 0; j < kCount; ++j)
      minus_x[j] = -x[j];
    float e[kCount];
    crExpN(minus_x, e);
#pragma unroll
    for (int j = 0; j < kCount; ++j) {
      const float s = 1.0f / (1.0f + e[j]);
      y[j] = crdetail::canonicalize(kOp == UnaryMathOp::kSigmoid ? s : x[j] * s);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kCount; ++j)
      y[j] = applyOp<Op>(x[j]);
  }
}

constexpr int kThreads = 256;
constexpr int kVector = 4;  // floats per 16-byte access

// Thread i maps floats [i * kVector, i * kVector + kVector) (then i + grid size, ...); the
// n % kVector trailing floats go one each to the first threads. Every float is read and written by
// the same thread, so out may equal in (no __restrict__). in and out are 16-byte aligned.
template <int Op>
__global__ void __launch_bounds__(kThreads)
    unaryMathVecKernel(const float* in, float* out, int64_t n) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t groups = n / kVector;
  for (int64_t i = first; i < groups; i += step) {
    const float4 v = reinterpret_cast<const float4*>(in)[i];
    const float x[kVector] = {v.x, v.y, v.z, v.w};
    float y[kVector];
    applyOpN<Op>(x, y);
    reinterpret_cast<float4*>(out)[i] = make_float4(y[0], y[1], y[2], y[3]);
  }
  const int64_t tail = groups * kVector + first;
  if (tail < n) out[tail] = applyOp<Op>(in[tail]);
}

// One float per thread, for arrays that are not 16-byte aligned.
template <int Op>
__global__ void __launch_bounds__(kThreads)
    unaryMathKernel(const float* in, float* out, int64_t n) {
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = applyOp<Op>(in[i]);
  }
}

unsigned blocksFor(int64_t items) {
  long long blocks = (items + kThreads - 1) / kThreads;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <int Op>
Status launch(const float* in, float* out, int64_t n, cudaStream_t stream) {
  if (aligned16(in) && aligned16(out)) {
    const unsigned blocks = blocksFor(n / kVector);
    unaryMathVecKernel<Op><<<blocks, kThreads, 0, stream>>>(in, out, n);
  } else {
    unaryMathKernel<Op><<<blocksFor(n), kThreads, 0, stream>>>(in, out, n);
  }
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
