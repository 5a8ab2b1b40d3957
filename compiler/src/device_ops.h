// Where the compiled graph's float work happens: the CPU or a CUDA device. Values move between
// host and device by exact copies; each call below runs the CPU RepOp or its CUDA twin (the same
// bits, docs/repops-spec/), on the legacy default stream, which the operation sets' blocking
// streams are ordered with.
#pragma once

#include <cstdint>
#include <vector>

#include "ree/compiler/compile.h"
#include "ree/kernels/elementwise.h"
#include "ree/kernels/math_ops.h"
#include "ree/kernels/rowops.h"

namespace ree::compiler {

// New uninitialised storage on `device`.
Status emptyOn(Device device, ElementType type, std::vector<int64_t> shape, GraphTensor* out);
// `in` itself when it is on `device`, else an exact copy there.
Status moveTo(const GraphTensor& in, Device device, GraphTensor* out);

namespace dev {
Status binary(Device device, BinaryOp op, const float* a, const float* b, float* out, int64_t n);
Status simpleUnary(Device device, SimpleUnaryOp op, const float* x, float* out, int64_t n);
Status unaryMath(Device device, UnaryMathOp op, const float* x, float* out, int64_t n);
Status where(Device device, const uint8_t* condition, const float* a, const float* b, float* out,
             int64_t n);
Status softmax(Device device, bool log, repops::RowsIn x, repops::RowsOut y, int64_t rows,
               int64_t cols);
Status reduceRows(Device device, repops::ReduceOp op, repops::RowsIn x, void* out, DType out_dtype,
                  int64_t rows, int64_t cols);
// out[i] = in[index[i]] (index[i] < 0: fill); `index` is on the host, uploaded for a device.
Status gather(Device device, int elem_bytes, const void* in, const std::vector<int64_t>& index,
              void* out, uint64_t fill);
}  // namespace dev

}  // namespace ree::compiler
