// CPU implementation of the row-wise RepOps (rowops.h). Each row is computed by one thread with
// the reference forms of reduce.h; rows are spread over threads, which never changes a result.
#include "ree/kernels/rowops.h"

#include <cmath>
#include <vector>

#include "ree/core/parallel.h"

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

namespace detail {

Status checkDType(const char* op, const char* name, DType dtype) {
  REE_CHECK_ARG(dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16,
                "%s: %s has an unknown dtype (%d)", op, name, static_cast<int>(dtype));
  return Status::kSuccess;
}

Status checkShape(const char* op, int64_t rows, int64_t cols) {
  REE_CHECK_ARG(rows >= 0, "%s: rows must be >= 0 (got %lld)", op, static_cast<long long>(rows));
  REE_CHECK_ARG(cols >= 1 && cols <= kRowOpsMaxCols, "%s: cols must be in [1, 2^24] (got %lld)", op,
                static_cast<long long>(cols));
  return Status::kSuccess;
}

Status checkRowsIn(const char* op, const char* name, RowsIn x, int64_t rows, int64_t cols) {
  REE_RETURN_IF_ERROR(checkDType(op, name, x.dtype));
  REE_CHECK_ARG(rows == 0 || x.data != nullptr, "%s: %s.data is null", op, name);
  REE_CHECK_ARG(rows <= 1 || x.row_stride >= cols,
                "%s: %s.row_stride (%lld) is smaller than cols (%lld)", op, name,
                static_cast<long long>(x.row_stride), static_cast<long long>(cols));
  return Status::kSuccess;
}

Status checkRowsOut(const char* op, const char* name, RowsOut y, int64_t rows, int64_t cols) {
  REE_RETURN_IF_ERROR(checkDType(op, name, y.dtype));
  REE_CHECK_ARG(rows == 0 || y.data != nullptr, "%s: %s.data is null", op, name);
  REE_CHECK_ARG(rows <= 1 || y.row_stride >= cols,
                "%s: %s.row_stride (%lld) is smaller than cols (%lld)", op, name,
                static_cast<long long>(y.row_stride), static_cast<long long>(cols));
  return Status::kSuccess;
}

Status checkEps(const char* op, float eps) {
  REE_CHECK_ARG(std::isfinite(eps) && eps >= 0.0f, "%s: eps must be finite and >= 0 (got %g)", op,
                static_cast<double>(eps));
  return Status::kSuccess;
}

}  // namespace detail

namespace cpu {
namespace {

// Calls f(T{}) with T the storage type of `dtype` (validated beforehand).
template <typename F>
void withType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32:
      f(float{});
      break;
    case DType::kBF16:
      f(bf16_t{});
      break;
    case DType::kF16:
      f(f16_t{});
      break;
  }
}

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

template <typename T>
float rowMax(const T* x, int n) {
  float m = loadFloat(x[0]);
  for (int k = 1; k < n; ++k)
    m = rowmath::maxCombine(m, loadFloat(x[k]));
  return m;
}

template <typename T>
float rowMin(const T* x, int n) {
  float m = loadFloat(x[0]);
  for (int k = 1; k < n; ++k)
    m = rowmath::minCombine(m, loadFloat(x[k]));
  return m;
}

template <typename T>
float rowSum(const T* x, int n) {
  return canonicalSum(n, [&](int k) { return loadFloat(x[k]); });
}

// Canonical sum of squared deviations from `mean`.
template <typename T>
float rowSquaredDeviations(const T* x, int n, float mean) {
  auto dev = [&](int k) { return loadFloat(x[k]) - mean; };
  return canonicalDot(n, dev, dev);
}

}  // namespace

Status rmsNorm(RowsIn x, VecIn weight, RowsOut y, int64_t rows, int64_t cols, float eps,
               RmsNormVariant variant) {
  const char* op = "rmsNorm";
  REE_RETURN_IF_ERROR(detail::checkShape(op, rows, cols));
  REE_RETURN_IF_ERROR(detail::checkRowsIn(op, "x", x, rows, cols));
  REE_RETURN_IF_ERROR(detail::checkRowsOut(op, "y", y, rows, cols));
  if (weight.data != nullptr) REE_RETURN_IF_ERROR(detail::checkDType(op, "weight", weight.dtype));
  REE_RETURN_IF_ERROR(detail::checkEps(op, eps));
  REE_CHECK_ARG(variant == RmsNormVariant::kF32 || variant == RmsNormVariant::kCastBeforeWeight,
                "%s: unknown variant %d", op, static_cast<int>(variant));
  if (rows == 0) return Status::kSuccess;
  std::vector<float> w = widen(weight, cols);
  const float* wp = w.empty() ? nullptr : w.data();
  const int n = static_cast<int>(cols);
  const bool cast_first = variant == RmsNormVariant::kCastBeforeWeight;
  withType(x.dtype, [&](auto in_tag) {
    using InT = decltype(in_tag);
    withType(y.dtype, [&](auto out_tag) {
      using OutT = decltype(out_tag);
      parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const InT* xr = rowPtr<InT>(x, i);
          OutT* yr = rowPtr<OutT>(y, i);
          auto load = [&](int k) { return loadFloat(xr[k]); };
          float r = rowmath::inverseRms(canonicalDot(n, load, load), n, eps);
          for (int k = 0; k < n; ++k) {
            float scaled = loadFloat(xr[k]) * r;
            if (cast_first) scaled = loadFloat(storeAs<InT>(scaled));
            yr[k] = rowmath::storeOut<OutT>(wp ? scaled * wp[k] : scaled);
          }
        }
      });
    });
  });
  return Status::kSuccess;
}

Status layerNorm(RowsIn x, VecIn weight, VecIn bias, RowsOut y, int64_t rows, int64_t cols,
                 float eps) {
  const char* op = "layerNorm";
  REE_RETURN_IF_ERROR(detail::checkShape(op, rows, cols));
  REE_RETURN_IF_ERROR(detail::checkRowsIn(op, "x", x, rows, cols));
  REE_RETURN_IF_ERROR(detail::checkRowsOut(op, "y", y, rows, cols));
  if (weight.data != nullptr) REE_RETURN_IF_ERROR(detail::checkDType(op, "weight", weight.dtype));
  if (bias.data != nullptr) REE_RETURN_IF_ERROR(detail::checkDType(op, "bias", bias.dtype));
  REE_RETURN_IF_ERROR(detail::checkEps(op, eps));
  if (rows == 0) return Status::kSuccess;
  std::vector<float> w = widen(weight, cols), b = widen(bias, cols);
  const bool has_w = !w.empty(), has_b = !b.empty();
  const int n = static_cast<int>(cols);
  withType(x.dtype, [&](auto in_tag) {
    using InT = decltype(in_tag);
    withType(y.dtype, [&](auto out_tag) {
      using OutT = decltype(out_tag);
      parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const InT* xr = rowPtr<InT>(x, i);
          OutT* yr = rowPtr<OutT>(y, i);
          float mean = rowmath::divideByCount(rowSum(xr, n), n);
          float r = rowmath::inverseRms(rowSquaredDeviations(xr, n, mean), n, eps);
          for (int k = 0; k < n; ++k) {
            yr[k] = rowmath::storeOut<OutT>(rowmath::layerNormValue(
                loadFloat(xr[k]), mean, r, has_w, has_w ? w[k] : 0.0f, has_b, has_b ? b[k] : 0.0f));
          }
        }
      });
    });
  });
  return Status::kSuccess;
}

namespace {

Status softmaxImpl(const char* op, bool log_output, RowsIn x, RowsOut y, int64_t rows,
                   int64_t cols) {
  REE_RETURN_IF_ERROR(detail::checkShape(op, rows, cols));
  REE_RETURN_IF_ERROR(detail::checkRowsIn(op, "x", x, rows, cols));
  REE_RETURN_IF_ERROR(detail::checkRowsOut(op, "y", y, rows, cols));
  if (rows == 0) return Status::kSuccess;
  const int n = static_cast<int>(cols);
  withType(x.dtype, [&](auto in_tag) {
    using InT = decltype(in_tag);
    withType(y.dtype, [&](auto out_tag) {
      using OutT = decltype(out_tag);
      parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
        std::vector<float> e(static_cast<size_t>(n));  // exp terms, kept for the second pass
        for (int64_t i = begin; i < end; ++i) {
          const InT* xr = rowPtr<InT>(x, i);
          OutT* yr = rowPtr<OutT>(y, i);
          float m = rowMax(xr, n);
          for (int k = 0; k < n; ++k)
            e[k] = rowmath::softmaxExp(loadFloat(xr[k]), m);
          float s = canonicalSum(n, [&](int k) { return e[k]; });
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
  return Status::kSuccess;
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
  REE_CHECK_ARG(op == ReduceOp::kSum || op == ReduceOp::kMean || op == ReduceOp::kMax ||
                    op == ReduceOp::kMin || op == ReduceOp::kVar,
                "%s: unknown op %d", name, static_cast<int>(op));
  REE_RETURN_IF_ERROR(detail::checkShape(name, rows, cols));
  REE_RETURN_IF_ERROR(detail::checkRowsIn(name, "x", x, rows, cols));
  REE_RETURN_IF_ERROR(detail::checkDType(name, "out_dtype", out_dtype));
  REE_CHECK_ARG(rows == 0 || out != nullptr, "%s: out is null", name);
  if (rows == 0) return Status::kSuccess;
  const int n = static_cast<int>(cols);
  withType(x.dtype, [&](auto in_tag) {
    using InT = decltype(in_tag);
    parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
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
  return Status::kSuccess;
}

Status argmaxRows(RowsIn x, int32_t* out, int64_t rows, int64_t cols) {
  const char* name = "argmaxRows";
  REE_RETURN_IF_ERROR(detail::checkShape(name, rows, cols));
  REE_RETURN_IF_ERROR(detail::checkRowsIn(name, "x", x, rows, cols));
  REE_CHECK_ARG(rows == 0 || out != nullptr, "%s: out is null", name);
  if (rows == 0) return Status::kSuccess;
  const int n = static_cast<int>(cols);
  withType(x.dtype, [&](auto in_tag) {
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
  return Status::kSuccess;
}

Status cast(RowsIn x, RowsOut y, int64_t rows, int64_t cols) {
  const char* name = "cast";
  REE_RETURN_IF_ERROR(detail::checkShape(name, rows, cols));
  REE_RETURN_IF_ERROR(detail::checkRowsIn(name, "x", x, rows, cols));
  REE_RETURN_IF_ERROR(detail::checkRowsOut(name, "y", y, rows, cols));
  if (rows == 0) return Status::kSuccess;
  withType(x.dtype, [&](auto in_tag) {
    using InT = decltype(in_tag);
    withType(y.dtype, [&](auto out_tag) {
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
  return Status::kSuccess;
}

}  // namespace cpu
}  // namespace repops
}  // namespace ree
