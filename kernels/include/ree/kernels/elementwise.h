// Element-wise fp32 RepOps beyond pointwise.h's add/mul/activations: the binary arithmetic,
// comparisons' selection (`where`) and the simple unary operators that graphs imported from ONNX
// use (docs/repops-spec/elementwise.md). Every element is one IEEE-754 operation (or one correctly
// rounded crmath function) on exact fp32 inputs, its NaN canonicalised, so the CPU and CUDA give
// the same bits and an element never depends on its neighbours, the thread count or the device.
// Operands have the same number of elements; broadcasting is the caller's (exact) copy.
#pragma once

#include <cmath>
#include <cstdint>

#include "ree/core/status.h"
#include "ree/kernels/crmath.h"
#include "ree/kernels/numeric.h"

namespace ree {

// The numeric values are stable (a compiled plan names them).
enum class BinaryOp : int {
  kAdd = 0,
  kSub = 1,
  kMul = 2,
  kDiv = 3,
  kPow = 4,  // crPow: correctly rounded x^y
  kMax = 5,  // NaN if either is NaN; +0 counts as larger than -0
  kMin = 6,  // NaN if either is NaN; -0 counts as smaller than +0
};
constexpr int kBinaryOpCount = 7;

enum class SimpleUnaryOp : int {
  kNeg = 0,
  kAbs = 1,
  kSqrt = 2,        // IEEE square root (correctly rounded)
  kReciprocal = 3,  // 1 / x, one IEEE division
  kRelu = 4,        // x > 0 ? x : +0 (NaN stays NaN)
};
constexpr int kSimpleUnaryOpCount = 5;

const char* binaryOpName(BinaryOp op);
const char* simpleUnaryOpName(SimpleUnaryOp op);

namespace elementwise {

REE_HD float canonical(float v) {
  return v != v ? bitsFloat(0x7fc00000u) : v;
}

REE_HD float binaryValue(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd:
      return canonical(a + b);
    case BinaryOp::kSub:
      return canonical(a - b);
    case BinaryOp::kMul:
      return canonical(a * b);
    case BinaryOp::kDiv:
      return canonical(a / b);
    case BinaryOp::kPow:
      return canonical(crPow(a, b));
    case BinaryOp::kMax:
      if (a != a || b != b) return bitsFloat(0x7fc00000u);
      if (a == b) return (floatBits(a) & 0x80000000u) ? b : a;
      return a > b ? a : b;
    case BinaryOp::kMin:
      if (a != a || b != b) return bitsFloat(0x7fc00000u);
      if (a == b) return (floatBits(a) & 0x80000000u) ? a : b;
      return a < b ? a : b;
  }
  return bitsFloat(0x7fc00000u);
}

REE_HD float unaryValue(SimpleUnaryOp op, float x) {
  switch (op) {
    case SimpleUnaryOp::kNeg:
      return canonical(-x);
    case SimpleUnaryOp::kAbs:
      return canonical(bitsFloat(floatBits(x) & 0x7fffffffu));
    case SimpleUnaryOp::kSqrt:
      return canonical(sqrtf(x));
    case SimpleUnaryOp::kReciprocal:
      return canonical(1.0f / x);
    case SimpleUnaryOp::kRelu:
      return x != x ? bitsFloat(0x7fc00000u) : (x > 0.0f ? x : 0.0f);
  }
  return bitsFloat(0x7fc00000u);
}

// Selection copies a value exactly (no arithmetic), NaN canonicalised like every other output.
REE_HD float whereValue(uint8_t condition, float a, float b) {
  return canonical(condition ? a : b);
}

}  // namespace elementwise

namespace repops::cpu {
// out[i] = op(a[i], b[i]) for i in [0, n); out may alias a or b.
Status binary(BinaryOp op, const float* a, const float* b, float* out, int64_t n);
// out[i] = op(x[i]); out may alias x.
Status simpleUnary(SimpleUnaryOp op, const float* x, float* out, int64_t n);
// out[i] = condition[i] != 0 ? a[i] : b[i].
Status where(const uint8_t* condition, const float* a, const float* b, float* out, int64_t n);
// out[i] = in[index[i]] for elements of `elem_bytes` (1, 4 or 8 bytes); index[i] < 0 writes the low
// elem_bytes bytes of `fill` (padding). Pure data movement: transposes, slices, broadcasts and
// im2col of the ONNX compiler. Indices are trusted (the caller computed them from the shapes).
Status gather(int elem_bytes, const void* in, const int64_t* index, void* out, int64_t n,
              uint64_t fill);
}  // namespace repops::cpu

namespace repops::cuda {
// Device pointers, asynchronous on `stream`; the same bits as the CPU.
Status binary(BinaryOp op, const float* a, const float* b, float* out, int64_t n,
              cudaStream_t stream);
Status simpleUnary(SimpleUnaryOp op, const float* x, float* out, int64_t n, cudaStream_t stream);
Status where(const uint8_t* condition, const float* a, const float* b, float* out, int64_t n,
             cudaStream_t stream);
// `index` is a device array too.
Status gather(int elem_bytes, const void* in, const int64_t* index, void* out, int64_t n,
              uint64_t fill, cudaStream_t stream);
}  // namespace repops::cuda

}  // namespace ree
