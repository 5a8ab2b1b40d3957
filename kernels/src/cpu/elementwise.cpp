// CPU element-wise RepOps (elementwise.h): the shared element functions over parallelFor ranges.
#include "ree/kernels/elementwise.h"

#include "common/elementwise_args.h"
#include "ree/core/parallel.h"

namespace ree::repops::cpu {

Status binary(BinaryOp op, const float* a, const float* b, float* out, int64_t n) {
  REE_RETURN_IF_ERROR(
      validateElementwiseArgs("binary", static_cast<int>(op), kBinaryOpCount, a, b, b, out, n));
  parallelFor(n, 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = elementwise::binaryValue(op, a[i], b[i]);
  });
  return Status::kSuccess;
}

Status simpleUnary(SimpleUnaryOp op, const float* x, float* out, int64_t n) {
  REE_RETURN_IF_ERROR(validateElementwiseArgs("simpleUnary", static_cast<int>(op),
                                              kSimpleUnaryOpCount, x, x, x, out, n));
  parallelFor(n, 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = elementwise::unaryValue(op, x[i]);
  });
  return Status::kSuccess;
}

Status where(const uint8_t* condition, const float* a, const float* b, float* out, int64_t n) {
  REE_RETURN_IF_ERROR(validateElementwiseArgs("where", 0, 1, condition, a, b, out, n));
  parallelFor(n, 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = elementwise::whereValue(condition[i], a[i], b[i]);
  });
  return Status::kSuccess;
}

}  // namespace ree::repops::cpu
