// Argument checks of the row-wise RepOps (rowops.h), shared by the CPU and CUDA entry points:
// one validate function per operator, so both backends accept the same calls and name a bad
// argument with the same words. `op` is the operator's name in the message.
#pragma once

#include <cstdint>

#include "ree/core/status.h"
#include "ree/kernels/rowops.h"

namespace ree::repops {

// The pieces (also used alone by the operators whose checks are only these).
Status checkShape(const char* op, int64_t rows, int64_t cols);
Status checkRowsIn(const char* op, const char* name, RowsIn x, int64_t rows, int64_t cols);
Status checkRowsOut(const char* op, const char* name, RowsOut y, int64_t rows, int64_t cols);
Status checkDType(const char* op, const char* name, DType dtype);
Status checkEps(const char* op, float eps);

// softmax, logSoftmax and cast: the shape, x and y.
Status validateRowsInOut(const char* op, RowsIn x, RowsOut y, int64_t rows, int64_t cols);

Status validateRmsNormArgs(const char* op, RowsIn x, VecIn weight, RowsOut y, int64_t rows,
                           int64_t cols, float eps, RmsNormVariant variant);

Status validateLayerNormArgs(const char* op, RowsIn x, VecIn weight, VecIn bias, RowsOut y,
                             int64_t rows, int64_t cols, float eps);

Status validateReduceRowsArgs(const char* op, ReduceOp reduce, RowsIn x, const void* out,
                              DType out_dtype, int64_t rows, int64_t cols);

Status validateArgmaxRowsArgs(const char* op, RowsIn x, const int32_t* out, int64_t rows,
                              int64_t cols);

}  // namespace ree::repops
