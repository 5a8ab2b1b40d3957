// Batch element-wise correctly rounded math (crmath.h) over float arrays, CPU and CUDA.
// Both give the same bits for every input (docs/repops-spec/crmath.md).
#pragma once

#include <cstdint>

#include "ree/core/status.h"
#include "ree/kernels/numeric.h"

namespace ree {

// Every unary function of crmath.h. The numeric values are stable (they may appear in receipts).
enum class UnaryMathOp : int {
  kExp = 0,
  kExpm1 = 1,
  kLog = 2,
  kLog1p = 3,
  kTanh = 4,
  kErf = 5,
  kSin = 6,
  kCos = 7,
  kRsqrt = 8,
  kSigmoid = 9,
  kSilu = 10,
  kGeluErf = 11,
  kGeluTanh = 12,
  kSoftplus = 13,
};
constexpr int kUnaryMathOpCount = 14;

// Short stable name ("exp", "gelu_tanh", ...); "?" for an unknown value.
const char* unaryMathOpName(UnaryMathOp op);

namespace repops::cpu {
// out[i] = op(in[i]) for i in [0, n). in == out (in place) is allowed; n == 0 is a no-op.
Status unaryMath(UnaryMathOp op, const float* in, float* out, int64_t n);

// The CPU kernels built twice, for portable x86-64 and for AVX2+FMA (picked at run time when the
// CPU has both): this math, the element-wise activations (pointwise.h), the row operations
// (rowops.h), RoPE (rope.h) and attention (attention.h). Both builds give the same bits; false
// keeps the portable build only, so that tests can compare the two. Process-wide; true by default.
void setVectorMathEnabled(bool enabled);
}  // namespace repops::cpu

namespace repops::cuda {
// Device pointers; asynchronous on `stream`. Same contract and bits as the CPU version.
Status unaryMath(UnaryMathOp op, const float* in, float* out, int64_t n, cudaStream_t stream);
}  // namespace repops::cuda

}  // namespace ree
