// CPU element-wise RepOps (elementwise.h): the shared element functions over parallelFor ranges.
#include "ree/kernels/elementwise.h"

#include <cstring>

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

namespace {

template <typename T>
void gatherTyped(const void* in, const int64_t* index, void* out, int64_t n, uint64_t fill) {
  const T* src = static_cast<const T*>(in);
  T* dst = static_cast<T*>(out);
  T fill_value;
  std::memcpy(&fill_value, &fill, sizeof(T));
  parallelFor(n, 1 << 15, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      dst[i] = index[i] >= 0 ? src[index[i]] : fill_value;
  });
}

}  // namespace

Status gather(int elem_bytes, const void* in, const int64_t* index, void* out, int64_t n,
              uint64_t fill) {
  REE_RETURN_IF_ERROR(validateElementwiseArgs("gather", 0, 1, in, index, out, out, n));
  REE_CHECK_ARG(elem_bytes == 1 || elem_bytes == 4 || elem_bytes == 8,
                "gather: elem_bytes %d (1, 4 or 8)", elem_bytes);
  if (elem_bytes == 1) gatherTyped<uint8_t>(in, index, out, n, fill);
  if (elem_bytes == 4) gatherTyped<uint32_t>(in, index, out, n, fill);
  if (elem_bytes == 8) gatherTyped<uint64_t>(in, index, out, n, fill);
  return Status::kSuccess;
}

}  // namespace ree::repops::cpu
