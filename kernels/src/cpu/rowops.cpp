// CPU implementation of the row-wise RepOps (rowops.h). Each row is computed by one thread with
// the reference forms of reduce.h; rows are spread over threads, which never changes a result.
#include "ree/kernels/rowops.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/dtype_dispatch.h"
#include "common/rowops_args.h"
#include "ree/core/parallel.h"
#include "vector_math.h"

namespace ree {
namespace repops {

const char* reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMean:
      return "mean";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kVar:
      return "var";
  }
  return "?";
}

namespace cpu {
namespace {

// Rows per parallel range: enough elements to be worth a thread.
int64_t rowGrain(int64_t cols) {
  return cols >= 16384 ? 1 : 16384 / cols;
}

// The weight or bias widened once to float (exact), or empty when absent.
std::vector<float> widen(VecIn v, int64_t cols) {
  std::vector<float> out;
  if (v.data == nullptr) return out;
  out.resize(static_cast<size_t>(cols));
  for (int64_t k = 0; k < cols; ++k)
    out[k] = rowmath::loadAt(v.data, v.dtype, k);
  return out;
}

template <typename T>
const T* rowPtr(RowsIn x, int64_t i) {
  return static_cast<const T*>(x.data) + i * x.row_stride;
}
template <typename T>
T* rowPtr(RowsOut y, int64_t i) {
  return static_cast<T*>(y.data) + i * y.row_stride;
}

// The spec's MAX order as signed integers (the CUDA select-stream kernel's orderedKey): for
// numbers, a < b with -0 < +0 iff key(a) < key(b); a NaN's key lies above +inf's (sign bit clear)
// or below -inf's (sign bit set). Flipping the magnitude bits of negative values is an involution,
// so keyValue(orderedKey(v)) == v bit for bit.
inline int32_t orderedKey(float v) {
  const uint32_t bits = floatBits(v);
  const uint32_t negative_mask = static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31) >> 1;
  return static_cast<int32_t>(bits ^ negative_mask);
}

inline float keyValue(int32_t key) {
  const uint32_t negative_mask = static_cast<uint32_t>(key >> 31) >> 1;
  return bitsFloat(static_cast<uint32_t>(key) ^ negative_mask);
}

// The smallest and largest key of a row (n >= 1). Max and min are order-free selections
// (rowmath::maxCombine, minCombine): the value of the largest (smallest) key is the row's maximum
// (minimum) whatever the grouping, so the row is scanned in kLanes independent lanes, which the
// compiler turns into vector integer compares (AVX2 ones in reduceRows' vector-math build), instead
// of one chain of dependent combines.
struct KeyRange {
  int32_t low, high;
};

template <typename T>
REE_VECTOR_MATH_INLINE inline KeyRange rowKeyRange(const T* x, int n) {
  constexpr int kLanes = 16;
  int32_t low[kLanes], high[kLanes];
  const int32_t first = orderedKey(loadFloat(x[0]));
  for (int j = 0; j < kLanes; ++j)
    low[j] = high[j] = first;
  int k = 0;
  for (; k + kLanes <= n; k += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const int32_t key = orderedKey(loadFloat(x[k + j]));
      low[j] = key < low[j] ? key : low[j];
      high[j] = key > high[j] ? key : high[j];
    }
  }
  KeyRange range{low[0], high[0]};
  for (int j = 1; j < kLanes; ++j) {
    range.low = low[j] < range.low ? low[j] : range.low;
    range.high = high[j] > range.high ? high[j] : range.high;
  }
  for (; k < n; ++k) {
    const int32_t key = orderedKey(loadFloat(x[k]));
    range.low = key < range.low ? key : range.low;
    range.high = key > range.high ? key : range.high;
  }
  return range;
}

// A row holds a NaN iff a key lies outside [key(-inf), key(+inf)].
bool holdsNaN(KeyRange range) {
  const float inf = std::numeric_limits<float>::infinity();
  return range.low < orderedKey(-inf) || range.high > orderedKey(inf);
}

template <typename T>
REE_VECTOR_MATH_INLINE inline float rowMax(const T* x, int n) {
  const KeyRange range = rowKeyRange(x, n);
  return holdsNaN(range) ? rowmath::canonicalNaN() : keyValue(range.high);
}

template <typename T>
REE_VECTOR_MATH_INLINE inline float rowMin(const T* x, int n) {
  const KeyRange range = rowKeyRange(x, n);
  return holdsNaN(range) ? rowmath::canonicalNaN() : keyValue(range.low);
}

// canonicalSum (kDot false: p + t) or canonicalDot of a term with itself (kDot: fma(t, t, p))
// over term(0..n-1), the chains of kInterleave consecutive whole chunks advanced together: each
// chunk's partial is still its own chain from +0 in position order and the partials are merged
// left to right (reduce.h), so the result is the same float, but the chains no longer wait for
// each other (one dependent add or fma per element was the bound).
constexpr int kInterleave = 8;

template <bool kDot, typename Term>
REE_VECTOR_MATH_INLINE inline float chainStep(float partial, Term term, int k) {
  const float t = term(k);
  return kDot ? fmaF32(t, t, partial) : partial + t;
}

template <bool kDot, typename Term>
REE_VECTOR_MATH_INLINE inline float interleavedCanonical(int n, Term term) {
  ChunkMerge merge;
  const int whole_groups = n / (kInterleave * kReduceChunk);
  for (int g = 0; g < whole_groups; ++g) {
    const int base = g * kInterleave * kReduceChunk;
    float partials[kInterleave] = {};  // +0
    for (int t = 0; t < kReduceChunk; ++t) {
      for (int c = 0; c < kInterleave; ++c)
        partials[c] = chainStep<kDot>(partials[c], term, base + c * kReduceChunk + t);
    }
    for (int c = 0; c < kInterleave; ++c)
      merge.add(partials[c]);
  }
  // The rest, one chunk at a time (the last one may be short).
  for (int begin = whole_groups * kInterleave * kReduceChunk; begin < n; begin += kReduceChunk) {
    const int end = begin + kReduceChunk < n ? begin + kReduceChunk : n;
    float partial = 0.0f;
    for (int k = begin; k < end; ++k)
      partial = chainStep<kDot>(partial, term, k);
    merge.add(partial);
  }
  return merge.total;
}

template <typename T>
REE_VECTOR_MATH_INLINE inline float rowSum(const T* x, int n) {
  return interleavedCanonical<false>(n, [&](int k) { return loadFloat(x[k]); });
}

// Canonical sum of squares of the row (RMSNorm's statistic).
template <typename T>
REE_VECTOR_MATH_INLINE inline float rowSumOfSquares(const T* x, int n) {
  return interleavedCanonical<true>(n, [&](int k) { return loadFloat(x[k]); });
}

// Canonical sum of squared deviations from `mean`.
template <typename T>
REE_VECTOR_MATH_INLINE inline float rowSquaredDeviations(const T* x, int n, float mean) {
  return interleavedCanonical<true>(n, [&](int k) { return loadFloat(x[k]) - mean; });
}

}  // namespace

Status rmsNorm(RowsIn x, VecIn weight, RowsOut y, int64_t rows, int64_t cols, float eps,
               RmsNormVariant variant) {
  const char* op = "rmsNorm";
  REE_RETURN_IF_ERROR(validateRmsNormArgs(op, x, weight, y, rows, cols, eps, variant));
  if (rows == 0) return Status::kSuccess;
  std::vector<float> w = widen(weight, cols);
  const float* wp = w.empty() ? nullptr : w.data();
  const int n = static_cast<int>(cols);
  const bool cast_first = variant == RmsNormVariant::kCastBeforeWeight;
  return dispatchStorageType(x.dtype, op, [&](auto in_tag) {
    using InT = decltype(in_tag);
    return dispatchStorageType(y.dtype, op, [&](auto out_tag) {
      using OutT = decltype(out_tag);
      parallelForVectorMath(rows, rowGrain(cols),
                            [&](int64_t begin, int64_t end) REE_VECTOR_MATH_INLINE {
                              for (int64_t i = begin; i < end; ++i) {
                                const InT* xr = rowPtr<InT>(x, i);
                                OutT* yr = rowPtr<OutT>(y, i);
                                float r = rowmath::inverseRms(rowSumOfSquares(xr, n), n, eps);
                                for (int k = 0; k < n; ++k) {
                                  float scaled = loadFloat(xr[k]) * r;
                                  if (cast_first) scaled = loadFloat(storeAs<InT>(scaled));
                                  yr[k] = rowmath::storeOut<OutT>(wp ? scaled * wp[k] : scaled);
                                }
                              }
                            });
    });
  });
}

Status layerNorm(RowsIn x, VecIn weight, VecIn bias, RowsOut y, int64_t rows, int64_t cols,
                 float eps) {
  const char* op = "layerNorm";
  REE_RETURN_IF_ERROR(validateLayerNormArgs(op, x, weight, bias, y, rows, cols, eps));
  if (rows == 0) return Status::kSuccess;
  std::vector<float> w = widen(weight, cols), b = widen(bias, cols);
  const bool has_w = !w.empty(), has_b = !b.empty();
  const int n = static_cast<int>(cols);
  return dispatchStorageType(x.dtype, op, [&](auto in_tag) {
    using InT = decltype(in_tag);
    return dispatchStorageType(y.dtype, op, [&](auto out_tag) {
      using OutT = decltype(out_tag);
      parallelForVectorMath(
          rows, rowGrain(cols), [&](int64_t begin, int64_t end) REE_VECTOR_MATH_INLINE {
            for (int64_t i = begin; i < end; ++i) {
              const InT* xr = rowPtr<InT>(x, i);
              OutT* yr = rowPtr<OutT>(y, i);
              float mean = rowmath::divideByCount(rowSum(xr, n), n);
              float r = rowmath::inverseRms(rowSquaredDeviations(xr, n, mean), n, eps);
              for (int k = 0; k < n; ++k) {
                yr[k] = rowmath::storeOut<OutT>(
                    rowmath::layerNormValue(loadFloat(xr[k]), mean, r, has_w, has_w ? w[k] : 0.0f,
                                            has_b, has_b ? b[k] : 0.0f));
              }
            }
          });
    });
  });
}

namespace {

Status softmaxImpl(const char* op, bool log_output, RowsIn x, RowsOut y, int64_t rows,
                   int64_t cols) {
  REE_RETURN_IF_ERROR(validateRowsInOut(op, x, y, rows, cols));
  if (rows == 0) return Status::kSuccess;
  const int n = static_cast<int>(cols);
  return dispatchStorageType(x.dtype, op, [&](auto in_tag) {
    using InT = decltype(in_tag);
    return dispatchStorageType(y.dtype, op, [&](auto out_tag) {
      using OutT = decltype(out_tag);
      parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
        std::vector<float> e(static_cast<size_t>(n));  // exp terms, kept for the second pass
        for (int64_t i = begin; i < end; ++i) {
          const InT* xr = rowPtr<InT>(x, i);
          OutT* yr = rowPtr<OutT>(y, i);
          float m = rowMax(xr, n);
          // Only this loop has fmas (crExp's): a small flattened vector-math body.
          runVectorMathFlat([&]() REE_VECTOR_MATH_INLINE {
            for (int k = 0; k < n; ++k)
              e[k] = rowmath::softmaxExp(loadFloat(xr[k]), m);
          });
          float s = interleavedCanonical<false>(n, [&](int k) { return e[k]; });
          if (log_output) {
            float log_sum = crLog(s);
            for (int k = 0; k < n; ++k) {
              yr[k] =
                  rowmath::storeOut<OutT>(rowmath::logSoftmaxValue(loadFloat(xr[k]), m, log_sum));
            }
          } else {
            for (int k = 0; k < n; ++k)
              yr[k] = rowmath::storeOut<OutT>(e[k] / s);
          }
        }
      });
    });
  });
}

}  // namespace

Status softmax(RowsIn x, RowsOut y, int64_t rows, int64_t cols) {
  return softmaxImpl("softmax", false, x, y, rows, cols);
}

Status logSoftmax(RowsIn x, RowsOut y, int64_t rows, int64_t cols) {
  return softmaxImpl("logSoftmax", true, x, y, rows, cols);
}

Status reduceRows(ReduceOp op, RowsIn x, void* out, DType out_dtype, int64_t rows, int64_t cols) {
  const char* name = "reduceRows";
  REE_RETURN_IF_ERROR(validateReduceRowsArgs(name, op, x, out, out_dtype, rows, cols));
  if (rows == 0) return Status::kSuccess;
  const int n = static_cast<int>(cols);
  return dispatchStorageType(x.dtype, name, [&](auto in_tag) {
    using InT = decltype(in_tag);
    parallelForVectorMath(
        rows, rowGrain(cols), [&](int64_t begin, int64_t end) REE_VECTOR_MATH_INLINE {
          for (int64_t i = begin; i < end; ++i) {
            const InT* xr = rowPtr<InT>(x, i);
            float value = 0.0f;
            switch (op) {
              case ReduceOp::kSum:
                value = rowSum(xr, n);
                break;
              case ReduceOp::kMean:
                value = rowmath::divideByCount(rowSum(xr, n), n);
                break;
              case ReduceOp::kMax:
                value = rowMax(xr, n);
                break;
              case ReduceOp::kMin:
                value = rowMin(xr, n);
                break;
              case ReduceOp::kVar: {
                float mean = rowmath::divideByCount(rowSum(xr, n), n);
                value = rowmath::divideByCount(rowSquaredDeviations(xr, n, mean), n);
                break;
              }
            }
            rowmath::storeAt(out, out_dtype, i, value);
          }
        });
  });
}

Status argmaxRows(RowsIn x, int32_t* out, int64_t rows, int64_t cols) {
  const char* name = "argmaxRows";
  REE_RETURN_IF_ERROR(validateArgmaxRowsArgs(name, x, out, rows, cols));
  if (rows == 0) return Status::kSuccess;
  const int n = static_cast<int>(cols);
  return dispatchStorageType(x.dtype, name, [&](auto in_tag) {
    using InT = decltype(in_tag);
    parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const InT* xr = rowPtr<InT>(x, i);
        float best = loadFloat(xr[0]);
        int32_t best_index = 0;
        for (int k = 1; k < n; ++k) {
          float v = loadFloat(xr[k]);
          if (rowmath::argmaxBetter(v, k, best, best_index)) {
            best = v;
            best_index = k;
          }
        }
        out[i] = best_index;
      }
    });
  });
}

Status cast(RowsIn x, RowsOut y, int64_t rows, int64_t cols) {
  const char* name = "cast";
  REE_RETURN_IF_ERROR(validateRowsInOut(name, x, y, rows, cols));
  if (rows == 0) return Status::kSuccess;
  return dispatchStorageType(x.dtype, name, [&](auto in_tag) {
    using InT = decltype(in_tag);
    return dispatchStorageType(y.dtype, name, [&](auto out_tag) {
      using OutT = decltype(out_tag);
      parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const InT* xr = rowPtr<InT>(x, i);
          OutT* yr = rowPtr<OutT>(y, i);
          for (int64_t k = 0; k < cols; ++k)
            yr[k] = storeAs<OutT>(loadFloat(xr[k]));
        }
      });
    });
  });
}

}  // namespace cpu
}  // namespace repops
}  // namespace ree
