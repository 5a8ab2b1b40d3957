// CUDA batch API of the correctly rounded math (crmath.h). When both arrays are 16-byte aligned a
// thread maps 2 x kVector = 8 floats per step: two 16-byte streaming loads (__ldcs) issued before
// any math, so twice the bytes are in flight, then two 16-byte streaming stores (__stcs: the output
// is not read again by this kernel); for exp, sigmoid and silu the four table paths of crExpN run
// side by side. Unaligned arrays take one float per thread. Each element gets exactly the function
// of the CPU version (crExpN gives crExp's bits), so the grouping changes no bit.
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

// Step k of block b covers float4 groups [(b + k * grid) * 2 * kThreads, + 2 * kThreads): thread t
// maps groups base + t and base + kThreads + t (each warp's loads coalesced), both loaded before
// either is computed (the math of the two halves shares one copy of the code). The n % kVector
// trailing floats go one each to the first threads. Every float is read and written by the same
// thread, so out may equal in (no __restrict__). in and out are 16-byte aligned.
template <int Op>
__global__ void __launch_bounds__(kThreads)
    unaryMathVecKernel(const float* in, float* out, int64_t n) {
  const int64_t groups = n / kVector;
  const int64_t step = static_cast<int64_t>(gridDim.x) * 2 * kThreads;
  const float4* in4 = reinterpret_cast<const float4*>(in);
  float4* out4 = reinterpret_cast<float4*>(out);
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * 2 * kThreads; base < groups;
       base += step) {
    const int64_t i0 = base + threadIdx.x;
    const int64_t i1 = i0 + kThreads;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float4 v0 = i0 < groups ? __ldcs(in4 + i0) : zero;
    const float4 v1 = i1 < groups ? __ldcs(in4 + i1) : zero;
    // One copy of the math for both halves (unroll 1: the slow paths are not inlined twice).
#pragma unroll 1
    for (int half = 0; half < 2; ++half) {
      const float4 v = half == 0 ? v0 : v1;
      const int64_t i = half == 0 ? i0 : i1;
      const float x[kVector] = {v.x, v.y, v.z, v.w};
      float y[kVector];
      applyOpN<Op>(x, y);
      if (i < groups) __stcs(out4 + i, make_float4(y[0], y[1], y[2], y[3]));
    }
  }
  const int64_t tail =
      groups * kVector + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
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

// Float4 groups in steps of two per thread: the vector kernel needs a thread for every two groups
// (and at least one thread per trailing float, kVector - 1 < kThreads).
int64_t divUpGroups(int64_t groups) {
  return (groups + 1) / 2;
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <int Op>
Status launch(const float* in, float* out, int64_t n, cudaStream_t stream) {
  if (aligned16(in) && aligned16(out)) {
    const unsigned blocks = blocksFor(divUpGroups(n / kVector));
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
