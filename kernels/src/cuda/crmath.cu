// CUDA batch API of the correctly rounded math (crmath.h). When both arrays are 16-byte aligned a
// thread maps 2 x kVector = 8 floats per step: two 16-byte streaming loads (__ldcs) issued before
// any math, so twice the bytes are in flight, then two 16-byte streaming stores (__stcs: the output
// is not read again by this kernel). For exp, sigmoid and silu the four table paths of crExp run
// side by side, branch-free, and the rare values off that path are redone by the scalar function;
// sigmoid and silu divide with the compiler's own reciprocal sequence minus its range test (see
// reciprocalBelowTwoPow126). Unaligned arrays take one float per thread. Each element gets exactly
// the function of the CPU version, so the grouping changes no bit.
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

// 1.0f / s, correctly rounded, for s in [1, 2^126) only. -prec-div=true compiles 1.0f / s to
// rcp.rn.f32, which ptxas (CUDA 13.0, the same for sm_80, 86, 89, 90 and 100) expands to: if the
// exponent field of s is in [1, 252], r = MUFU.RCP(s), t = fma(s, r, -1), q = fma(r, -t, r)
// (there -t is a separate FADD.FTZ; t = 0 or |t| >= 2^-47 since s r is a multiple of 2^-47, so
// the negation is exact and never flushed), else a subroutine. This is that fast path without the
// exponent test and its branch: the same instructions, so the same bits (checked against the
// division on all 2^32 inputs of sigmoid and silu by the GPU test).
__device__ __forceinline__ float reciprocalBelowTwoPow126(float s) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
  const float t = __fmaf_rn(s, r, -1.0f);
  return __fmaf_rn(r, -t, r);
}

// Sigmoid and silu stay on the fast path for -x in [kExpTableMin, 87] (and a table value away
// from a rounding boundary): then e = crExp(-x) <= e^87 < 2^125.6, so 1 + e lies in [1, 2^126) and
// the quotient, and x times it, are finite (no NaN: no canonicalize).
constexpr float kSigmoidFastMaxNegX = 87.0f;

// kCount results of exp, sigmoid or silu: crExp's branch-free table path (crdetail::expTableTry,
// as in crExpN) for all kCount values side by side, then crSigmoid's / crSilu's float operations
// in the same order. If any value is off the fast path (outside its range, NaN, or a table value
// near a rounding boundary: rare), all kCount are redone by crExp / crSigmoid / crSilu, which give
// the same bits for the others; one flag is cheaper than a mask of which ones.
template <UnaryMathOp kOp, int kCount>
__device__ __forceinline__ void tablePathN(const float (&x)[kCount], float (&y)[kCount]) {
  bool all_fast = true;
#pragma unroll
  for (int j = 0; j < kCount; ++j) {
    if constexpr (kOp == UnaryMathOp::kExp) {
      all_fast &= crdetail::expTableTry(x[j], &y[j]);
    } else {
      const float minus_x = -x[j];
      float e;
      const bool fast = crdetail::expTableTry(minus_x, &e) & (minus_x <= kSigmoidFastMaxNegX);
      const float q = reciprocalBelowTwoPow126(1.0f + e);  // any value when !fast: redone below
      y[j] = kOp == UnaryMathOp::kSigmoid ? q : x[j] * q;
      all_fast &= fast;
    }
  }
  if (!all_fast) {
#pragma unroll
    for (int j = 0; j < kCount; ++j)
      y[j] = applyOp<static_cast<int>(kOp)>(x[j]);
  }
}

// kCount consecutive results: exp, sigmoid and silu through tablePathN, the others one by one.
template <int Op, int kCount>
__device__ __forceinline__ void applyOpN(const float (&x)[kCount], float (&y)[kCount]) {
  constexpr auto kOp = static_cast<UnaryMathOp>(Op);
  if constexpr (kOp == UnaryMathOp::kExp || kOp == UnaryMathOp::kSigmoid ||
                kOp == UnaryMathOp::kSilu) {
    tablePathN<kOp>(x, y);
  } else {
#pragma unroll
    for (int j = 0; j < kCount; ++j)
      y[j] = applyOp<Op>(x[j]);
  }
}

constexpr int kThreads = 256;
constexpr int kVector = 4;  // floats per 16-byte access

// Exp, sigmoid and silu are light enough (the table path) for 5 resident blocks of 256 threads per
// SM (48 registers, none spilled with 32-bit indices): on an H100 that overlaps their math with
// DRAM best (4 blocks of 56 registers or 6 of 40 are slower). The others keep the compiler's
// choice.
template <int Op>
constexpr int vecMinBlocks() {
  constexpr auto kOp = static_cast<UnaryMathOp>(Op);
  return kOp == UnaryMathOp::kExp || kOp == UnaryMathOp::kSigmoid || kOp == UnaryMathOp::kSilu ? 5
                                                                                               : 1;
}

// Step k of block b covers float4 groups [(b + k * grid) * 2 * kThreads, + 2 * kThreads): thread t
// maps groups base + t and base + kThreads + t (each warp's loads coalesced), both loaded before
// either is computed (the math of the two halves shares one copy of the code). The n % kVector
// trailing floats go one each to the first threads. Every float is read and written by the same
// thread, so out may equal in (no __restrict__). in and out are 16-byte aligned. Group indices
// are 32-bit (fewer registers): n / kVector <= kMaxVecLaunchGroups, so an index plus one step
// (at most 2^20 blocks x 2 x kThreads = 2^29 groups) stays below 2^32.
constexpr int64_t kMaxVecLaunchGroups = int64_t{1} << 31;

template <int Op>
__global__ void __launch_bounds__(kThreads, vecMinBlocks<Op>())
    unaryMathVecKernel(const float* in, float* out, int64_t n) {
  const uint32_t groups = static_cast<uint32_t>(n / kVector);
  const uint32_t step = gridDim.x * 2 * kThreads;
  const float4* in4 = reinterpret_cast<const float4*>(in);
  float4* out4 = reinterpret_cast<float4*>(out);
  // i0 - threadIdx.x is the step's first group: the same for the whole block.
  for (uint32_t i0 = blockIdx.x * 2 * kThreads + threadIdx.x; i0 - threadIdx.x < groups;
       i0 += step) {
    const uint32_t i1 = i0 + kThreads;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float4 v0 = i0 < groups ? __ldcs(in4 + i0) : zero;
    const float4 v1 = i1 < groups ? __ldcs(in4 + i1) : zero;
    // One copy of the math for both halves (unroll 1: the slow paths are not inlined twice).
#pragma unroll 1
    for (int half = 0; half < 2; ++half) {
      const float4 v = half == 0 ? v0 : v1;
      const uint32_t i = i0 + half * kThreads;
      const float x[kVector] = {v.x, v.y, v.z, v.w};
      float y[kVector];
      applyOpN<Op>(x, y);
      if (i < groups) __stcs(out4 + i, make_float4(y[0], y[1], y[2], y[3]));
    }
  }
  const int64_t tail =
      int64_t{groups} * kVector + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
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

// The vector kernel over at most kMaxVecLaunchGroups groups per launch (arrays of more than 2^33
// floats take several; the pieces before the last hold whole groups, so only the last has
// trailing floats, and their offsets keep 16-byte alignment).
template <int Op>
Status launchVector(const float* in, float* out, int64_t n, cudaStream_t stream) {
  constexpr int64_t kMaxFloats = kMaxVecLaunchGroups * kVector;
  for (int64_t done = 0; done < n; done += kMaxFloats) {
    const int64_t count = n - done < kMaxFloats ? n - done : kMaxFloats;
    const unsigned blocks = blocksFor(divUpGroups(count / kVector));
    unaryMathVecKernel<Op><<<blocks, kThreads, 0, stream>>>(in + done, out + done, count);
    REE_CUDA_CHECK_LAUNCH();
  }
  return Status::kSuccess;
}

template <int Op>
Status launch(const float* in, float* out, int64_t n, cudaStream_t stream) {
  if (aligned16(in) && aligned16(out)) return launchVector<Op>(in, out, n, stream);
  unaryMathKernel<Op><<<blocksFor(n), kThreads, 0, stream>>>(in, out, n);
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
