// Row-wise RepOps: RMSNorm, LayerNorm, softmax, log-softmax, last-axis reductions, argmax and
// dtype casts over a rows x cols matrix with row strides (docs/repops-spec/rowops.md).
//
// Every operator is a fixed sequence of IEEE-754 float operations; reductions use the canonical
// chunked orders of reduce.h, transcendental functions are the correctly rounded ones of crmath.h.
// The CPU and CUDA implementations therefore give identical bits, and a row's result never
// depends on how many rows are processed together, the CPU thread count or the GPU.
//
// Conventions shared by all entry points:
// - Strides count elements, not bytes; a stride must be >= cols (it is ignored when rows == 1).
// - rows == 0 is a no-op; 1 <= cols <= kRowOpsMaxCols (so that float(cols) is exact).
// - In-place (y.data == x.data) is allowed when y has the same dtype and row stride as x; any
//   other overlap between inputs and outputs is undefined.
// - The arithmetic is fp32; inputs are widened exactly, outputs rounded once to their dtype (RNE)
//   unless the operator's definition says otherwise.
#pragma once

#include <cstdint>

#include "ree/core/status.h"
#include "ree/kernels/crmath.h"
#include "ree/kernels/numeric.h"
#include "ree/kernels/reduce.h"

namespace ree {
namespace repops {

constexpr int64_t kRowOpsMaxCols = int64_t{1} << 24;

// A read-only rows x cols matrix: element (i, j) is at data + i * row_stride + j (in elements).
struct RowsIn {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t row_stride = 0;
};

// A writable rows x cols matrix, same layout rules as RowsIn.
struct RowsOut {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t row_stride = 0;
};

// A contiguous vector of cols elements (norm weight or bias); data == nullptr means "absent".
struct VecIn {
  const void* data = nullptr;
  DType dtype = DType::kF32;
};

// Where RMSNorm rounds (docs/repops-spec/rowops.md, "RMSNorm").
enum class RmsNormVariant : int {
  // y = round_out((x * r) * w): one rounding to the output dtype.
  kF32 = 0,
  // Llama / Hugging Face transformers: the normalised value is cast to the INPUT dtype first,
  // then multiplied by the weight: y = round_out(float(round_in(x * r)) * w).
  kCastBeforeWeight = 1,
};

enum class ReduceOp : int {
  kSum = 0,   // canonical sum
  kMean = 1,  // canonical sum / cols
  kMax = 2,   // NaN if any NaN (canonical +qNaN); +0 counts as larger than -0
  kMin = 3,   // NaN if any NaN (canonical +qNaN); -0 counts as smaller than +0
  kVar = 4,   // population variance, two passes: canonicalDot(x - mean, x - mean) / cols
};

const char* reduceOpName(ReduceOp op);

// ---- Shared arithmetic (host and device; the single source of the operators' math) -------------
namespace rowmath {

// The canonical quiet NaN that max/min return when a row holds any NaN (sign never depends on
// which NaN was seen first).
REE_HD float canonicalNaN() {
  return bitsFloat(0x7fc00000u);
}

REE_HD bool isNaN(float v) {
  return (floatBits(v) & 0x7fffffffu) > 0x7f800000u;
}

// Output rounding of every arithmetic operator: NaN becomes the canonical positive quiet NaN
// first, because x86 and CUDA disagree on the sign and payload of NaNs that IEEE operations
// produce (x86 makes -qNaN for inf - inf, CUDA 0x7fffffff). Then one RNE rounding to T.
template <typename T>
REE_HD T storeOut(float v) {
  return storeCanonical<T>(v);  // = storeAs<T>(isNaN(v) ? canonicalNaN() : v), one NaN test
}

// Total-order max/min used by kMax/kMin and softmax's row max. The result is one of the inputs
// (or the canonical NaN), selected by an order in which -0 < +0, so the reduction may be evaluated
// in any association and grouping with the same bits.
REE_HD float maxCombine(float a, float b) {
  if (isNaN(a) || isNaN(b)) return canonicalNaN();
  if (a == b) return (floatBits(a) & 0x80000000u) ? b : a;  // differs only for {-0, +0}
  return a > b ? a : b;
}

REE_HD float minCombine(float a, float b) {
  if (isNaN(a) || isNaN(b)) return canonicalNaN();
  if (a == b) return (floatBits(a) & 0x80000000u) ? a : b;
  return a < b ? a : b;
}

// Argmax candidate order: any NaN beats every number; among numbers the larger wins with IEEE
// comparison (-0 == +0); equal keys go to the lower index. A strict total order on
// (key, index), so any reduction tree picks the same winner.
REE_HD bool argmaxBetter(float a, int32_t ia, float b, int32_t ib) {
  bool nan_a = isNaN(a), nan_b = isNaN(b);
  if (nan_a != nan_b) return nan_a;
  if (!nan_a && a != b) return a > b;
  return ia < ib;
}

// sum / n with one IEEE division (n <= 2^24 is exact in float).
REE_HD float divideByCount(float sum, int64_t n) {
  return sum / static_cast<float>(n);
}

// RMSNorm / LayerNorm scale: r = crRsqrt(sum_of_squares / n + eps).
REE_HD float inverseRms(float sum_of_squares, int64_t n, float eps) {
  return crRsqrt(divideByCount(sum_of_squares, n) + eps);
}

// Softmax numerator: crExp(x - m).
REE_HD float softmaxExp(float x, float row_max) {
  return crExp(x - row_max);
}

// softmaxExp of N values of one row (the same bits): the exps overlap (crExpN).
template <int N>
REE_HD void softmaxExpN(const float (&x)[N], float row_max, float (&e)[N]) {
  float d[N];
  for (int i = 0; i < N; ++i)
    d[i] = x[i] - row_max;
  crExpN(d, e);
}

// RMSNorm output before the final rounding, variant kF32: (x * r) * w.
REE_HD float rmsNormF32(float x, float r, float w) {
  return (x * r) * w;
}

// LayerNorm output before the final rounding: ((x - mean) * r) * w [+ b via one fma].
REE_HD float layerNormValue(float x, float mean, float r, bool has_w, float w, bool has_b,
                            float b) {
  float normalized = (x - mean) * r;
  if (has_w) {
    return has_b ? fmaF32(normalized, w, b) : normalized * w;
  }
  return has_b ? normalized + b : normalized;
}

// Log-softmax: (x - m) - log(sum).
REE_HD float logSoftmaxValue(float x, float row_max, float log_sum) {
  return (x - row_max) - log_sum;
}

// Element i of a vector of runtime dtype, widened exactly to float.
REE_HD float loadAt(const void* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBF16:
      return toFloat(static_cast<const bf16_t*>(data)[i]);
    case DType::kF16:
      return toFloat(static_cast<const f16_t*>(data)[i]);
    default:
      return static_cast<const float*>(data)[i];
  }
}

// Rounds `value` to `dtype` (as storeOut: NaN canonicalised) and stores it as element i.
REE_HD void storeAt(void* data, DType dtype, int64_t i, float value) {
  if (isNaN(value)) value = canonicalNaN();
  switch (dtype) {
    case DType::kBF16:
      static_cast<bf16_t*>(data)[i] = toBF16(value);
      break;
    case DType::kF16:
      static_cast<f16_t*>(data)[i] = toF16(value);
      break;
    default:
      static_cast<float*>(data)[i] = value;
      break;
  }
}

}  // namespace rowmath

// ---- CPU
// ------------------------------------------------------------------------------------------
namespace cpu {

// y[i, j] = RMSNorm of row i (weight optional: absent means no multiplication).
Status rmsNorm(RowsIn x, VecIn weight, RowsOut y, int64_t rows, int64_t cols, float eps,
               RmsNormVariant variant = RmsNormVariant::kF32);

// y[i, j] = LayerNorm of row i (population variance; weight and bias each optional).
Status layerNorm(RowsIn x, VecIn weight, VecIn bias, RowsOut y, int64_t rows, int64_t cols,
                 float eps);

Status softmax(RowsIn x, RowsOut y, int64_t rows, int64_t cols);
Status logSoftmax(RowsIn x, RowsOut y, int64_t rows, int64_t cols);

// out[i] = op over row i, rounded to out_dtype; out is contiguous (rows elements).
Status reduceRows(ReduceOp op, RowsIn x, void* out, DType out_dtype, int64_t rows, int64_t cols);

// out[i] = index of the largest element of row i (NaN counts as largest; ties: lowest index).
Status argmaxRows(RowsIn x, int32_t* out, int64_t rows, int64_t cols);

// y = x converted to y.dtype (through float; one RNE rounding; NaN -> canonical quiet NaN of the
// target dtype with the sign kept, except f32 -> f32 which copies the bits).
Status cast(RowsIn x, RowsOut y, int64_t rows, int64_t cols);

}  // namespace cpu

// ---- CUDA (same results, bit for bit; asynchronous on `stream`)
// ----------------------------------
namespace cuda {

Status rmsNorm(RowsIn x, VecIn weight, RowsOut y, int64_t rows, int64_t cols, float eps,
               RmsNormVariant variant, cudaStream_t stream);
Status layerNorm(RowsIn x, VecIn weight, VecIn bias, RowsOut y, int64_t rows, int64_t cols,
                 float eps, cudaStream_t stream);
Status softmax(RowsIn x, RowsOut y, int64_t rows, int64_t cols, cudaStream_t stream);
Status logSoftmax(RowsIn x, RowsOut y, int64_t rows, int64_t cols, cudaStream_t stream);
Status reduceRows(ReduceOp op, RowsIn x, void* out, DType out_dtype, int64_t rows, int64_t cols,
                  cudaStream_t stream);
Status argmaxRows(RowsIn x, int32_t* out, int64_t rows, int64_t cols, cudaStream_t stream);
Status cast(RowsIn x, RowsOut y, int64_t rows, int64_t cols, cudaStream_t stream);

}  // namespace cuda

}  // namespace repops
}  // namespace ree
