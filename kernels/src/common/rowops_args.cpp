#include "rowops_args.h"

#include <cmath>

#include "dtype_dispatch.h"

namespace ree::repops {

Status checkDType(const char* op, const char* name, DType dtype) {
  REE_CHECK_ARG(isStorageType(dtype), "%s: %s has an unknown dtype (%d)", op, name,
                static_cast<int>(dtype));
  return Status::kSuccess;
}

Status checkShape(const char* op, int64_t rows, int64_t cols) {
  REE_CHECK_ARG(rows >= 0, "%s: rows must be >= 0 (got %lld)", op, static_cast<long long>(rows));
  REE_CHECK_ARG(cols >= 1 && cols <= kRowOpsMaxCols, "%s: cols must be in [1, 2^24] (got %lld)", op,
                static_cast<long long>(cols));
  return Status::kSuccess;
}

namespace {

// RowsIn and RowsOut: a known dtype, data when there are rows, a stride of at least a row.
template <typename Rows>
Status checkRows(const char* op, const char* name, const Rows& m, int64_t rows, int64_t cols) {
  REE_RETURN_IF_ERROR(checkDType(op, name, m.dtype));
  REE_CHECK_ARG(rows == 0 || m.data != nullptr, "%s: %s.data is null", op, name);
  REE_CHECK_ARG(rows <= 1 || m.row_stride >= cols,
                "%s: %s.row_stride (%lld) is smaller than cols (%lld)", op, name,
                static_cast<long long>(m.row_stride), static_cast<long long>(cols));
  return Status::kSuccess;
}

}  // namespace

Status checkRowsIn(const char* op, const char* name, RowsIn x, int64_t rows, int64_t cols) {
  return checkRows(op, name, x, rows, cols);
}

Status checkRowsOut(const char* op, const char* name, RowsOut y, int64_t rows, int64_t cols) {
  return checkRows(op, name, y, rows, cols);
}

Status checkEps(const char* op, float eps) {
  REE_CHECK_ARG(std::isfinite(eps) && eps >= 0.0f, "%s: eps must be finite and >= 0 (got %g)", op,
                static_cast<double>(eps));
  return Status::kSuccess;
}

Status validateRowsInOut(const char* op, RowsIn x, RowsOut y, int64_t rows, int64_t cols) {
  REE_RETURN_IF_ERROR(checkShape(op, rows, cols));
  REE_RETURN_IF_ERROR(checkRowsIn(op, "x", x, rows, cols));
  REE_RETURN_IF_ERROR(checkRowsOut(op, "y", y, rows, cols));
  return Status::kSuccess;
}

Status validateRmsNormArgs(const char* op, RowsIn x, VecIn weight, RowsOut y, int64_t rows,
                           int64_t cols, float eps, RmsNormVariant variant) {
  REE_RETURN_IF_ERROR(validateRowsInOut(op, x, y, rows, cols));
  if (weight.data != nullptr) REE_RETURN_IF_ERROR(checkDType(op, "weight", weight.dtype));
  REE_RETURN_IF_ERROR(checkEps(op, eps));
  REE_CHECK_ARG(variant == RmsNormVariant::kF32 || variant == RmsNormVariant::kCastBeforeWeight,
                "%s: unknown variant %d", op, static_cast<int>(variant));
  return Status::kSuccess;
}

Status validateLayerNormArgs(const char* op, RowsIn x, VecIn weight, VecIn bias, RowsOut y,
                             int64_t rows, int64_t cols, float eps) {
  REE_RETURN_IF_ERROR(validateRowsInOut(op, x, y, rows, cols));
  if (weight.data != nullptr) REE_RETURN_IF_ERROR(checkDType(op, "weight", weight.dtype));
  if (bias.data != nullptr) REE_RETURN_IF_ERROR(checkDType(op, "bias", bias.dtype));
  REE_RETURN_IF_ERROR(checkEps(op, eps));
  return Status::kSuccess;
}

Status validateReduceRowsArgs(const char* op, ReduceOp reduce, RowsIn x, const void* out,
                              DType out_dtype, int64_t rows, int64_t cols) {
  REE_CHECK_ARG(reduce == ReduceOp::kSum || reduce == ReduceOp::kMean || reduce == ReduceOp::kMax ||
                    reduce == ReduceOp::kMin || reduce == ReduceOp::kVar,
                "%s: unknown op %d", op, static_cast<int>(reduce));
  REE_RETURN_IF_ERROR(checkShape(op, rows, cols));
  REE_RETURN_IF_ERROR(checkRowsIn(op, "x", x, rows, cols));
  REE_RETURN_IF_ERROR(checkDType(op, "out_dtype", out_dtype));
  REE_CHECK_ARG(rows == 0 || out != nullptr, "%s: out is null", op);
  return Status::kSuccess;
}

Status validateArgmaxRowsArgs(const char* op, RowsIn x, const int32_t* out, int64_t rows,
                              int64_t cols) {
  REE_RETURN_IF_ERROR(checkShape(op, rows, cols));
  REE_RETURN_IF_ERROR(checkRowsIn(op, "x", x, rows, cols));
  REE_CHECK_ARG(rows == 0 || out != nullptr, "%s: out is null", op);
  return Status::kSuccess;
}

}  // namespace ree::repops
