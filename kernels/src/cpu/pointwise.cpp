// CPU embedding gather and elementwise operators (docs/repops-spec/pointwise.md); the arithmetic
// lives in pointwise.h.
#include "ree/kernels/pointwise.h"

#include <cstring>

#include "common/dtype_dispatch.h"
#include "common/pointwise_args.h"
#include "ree/core/parallel.h"
#include "vector_math.h"

namespace ree::repops::cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;

template <typename Op>
Status binary(const char* name, DType dtype, const void* a, const void* b, void* out, int64_t n,
              Op op) {
  REE_RETURN_IF_ERROR(validateBinaryArgs(name, dtype, a, b, out, n));
  if (n == 0) return Status::kSuccess;
  return dispatchStorageType(dtype, name, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    T* po = static_cast<T*>(out);
    parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        po[i] = op(pa[i], pb[i]);
    });
  });
}

}  // namespace

Status embedding(DType dtype, const void* table, int64_t vocab, int64_t dim, const int32_t* ids,
                 int64_t count, void* out) {
  REE_RETURN_IF_ERROR(validateEmbeddingArgs(dtype, table, vocab, dim, ids, count, out));
  if (count == 0) return Status::kSuccess;
  REE_RETURN_IF_ERROR(validateEmbeddingIds(ids, count, vocab));
  const size_t row_bytes = static_cast<size_t>(dim) * dtypeSize(dtype);
  const auto* src = static_cast<const unsigned char*>(table);
  auto* dst = static_cast<unsigned char*>(out);
  parallelFor(count, 64, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      std::memcpy(dst + i * row_bytes, src + static_cast<int64_t>(ids[i]) * row_bytes, row_bytes);
    }
  });
  return Status::kSuccess;
}

Status add(DType dtype, const void* a, const void* b, void* out, int64_t n) {
  return binary("add", dtype, a, b, out, n, [](auto x, auto y) { return addElement(x, y); });
}

Status mul(DType dtype, const void* a, const void* b, void* out, int64_t n) {
  return binary("mul", dtype, a, b, out, n, [](auto x, auto y) { return mulElement(x, y); });
}

Status activation(Activation activation, DType dtype, const void* x, void* out, int64_t n) {
  REE_RETURN_IF_ERROR(validateActivationArgs(activation, dtype, x, out, n));
  if (n == 0) return Status::kSuccess;
  return dispatchStorageType(dtype, "activation", [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x);
    T* po = static_cast<T*>(out);
    parallelForVectorMath(n, kGrain, [&](int64_t begin, int64_t end) REE_VECTOR_MATH_INLINE {
      for (int64_t i = begin; i < end; ++i)
        po[i] = activationElement(activation, px[i]);
    });
  });
}

Status gated(Activation activation, DType dtype, const void* gate, int64_t gate_stride,
             const void* up, int64_t up_stride, void* out, int64_t out_stride, int64_t rows,
             int64_t cols) {
  REE_RETURN_IF_ERROR(validateGatedArgs(activation, dtype, gate, gate_stride, up, up_stride, out,
                                        out_stride, rows, cols));
  if (rows == 0 || cols == 0) return Status::kSuccess;
  return dispatchStorageType(dtype, "gated", [&](auto tag) {
    using T = decltype(tag);
    const T* pg = static_cast<const T*>(gate);
    const T* pu = static_cast<const T*>(up);
    T* po = static_cast<T*>(out);
    int64_t grain = kGrain / cols > 0 ? kGrain / cols : 1;
    parallelForVectorMath(rows, grain, [&](int64_t begin, int64_t end) REE_VECTOR_MATH_INLINE {
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          po[r * out_stride + c] =
              gatedElement(activation, pg[r * gate_stride + c], pu[r * up_stride + c]);
        }
      }
    });
  });
}

}  // namespace ree::repops::cpu
