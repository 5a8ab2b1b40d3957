// CPU embedding gather and elementwise operators (docs/repops-spec/pointwise.md); the arithmetic
// lives in pointwise.h.
#include "ree/kernels/pointwise.h"

#include <cstring>

#include "ree/core/parallel.h"

namespace ree::repops::cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;

bool knownDType(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
}

bool knownActivation(Activation activation) {
  return activation == Activation::kSilu || activation == Activation::kGeluErf ||
         activation == Activation::kGeluTanh;
}

// Calls fn(T{}) with T the storage type of `dtype` (already validated).
template <typename Fn>
void dispatch(DType dtype, Fn fn) {
  switch (dtype) {
    case DType::kF32:
      fn(float{});
      break;
    case DType::kBF16:
      fn(bf16_t{});
      break;
    case DType::kF16:
      fn(f16_t{});
      break;
  }
}

template <typename Op>
Status binary(const char* name, DType dtype, const void* a, const void* b, void* out, int64_t n,
              Op op) {
  REE_CHECK_ARG(knownDType(dtype), "%s: unknown dtype %d", name, static_cast<int>(dtype));
  REE_CHECK_ARG(n >= 0, "%s: n must be >= 0, got %lld", name, static_cast<long long>(n));
  if (n == 0) return Status::kSuccess;
  REE_CHECK_ARG(a && b && out, "%s: null pointer (a=%p b=%p out=%p)", name, a, b, out);
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    T* po = static_cast<T*>(out);
    parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        po[i] = op(pa[i], pb[i]);
    });
  });
  return Status::kSuccess;
}

}  // namespace

Status embedding(DType dtype, const void* table, int64_t vocab, int64_t dim, const int32_t* ids,
                 int64_t count, void* out) {
  REE_CHECK_ARG(knownDType(dtype), "embedding: unknown dtype %d", static_cast<int>(dtype));
  REE_CHECK_ARG(
      vocab > 0 && dim > 0 && count >= 0, "embedding: bad shape vocab=%lld dim=%lld count=%lld",
      static_cast<long long>(vocab), static_cast<long long>(dim), static_cast<long long>(count));
  if (count == 0) return Status::kSuccess;
  REE_CHECK_ARG(table && ids && out, "embedding: null pointer (table=%p ids=%p out=%p)", table,
                static_cast<const void*>(ids), out);
  for (int64_t i = 0; i < count; ++i) {
    REE_CHECK_ARG(ids[i] >= 0 && ids[i] < vocab,
                  "embedding: ids[%lld] = %d is outside the vocabulary [0, %lld)",
                  static_cast<long long>(i), ids[i], static_cast<long long>(vocab));
  }
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
  REE_CHECK_ARG(knownDType(dtype), "activation: unknown dtype %d", static_cast<int>(dtype));
  REE_CHECK_ARG(knownActivation(activation), "activation: unknown kind %d",
                static_cast<int>(activation));
  REE_CHECK_ARG(n >= 0, "activation: n must be >= 0, got %lld", static_cast<long long>(n));
  if (n == 0) return Status::kSuccess;
  REE_CHECK_ARG(x && out, "activation: null pointer (x=%p out=%p)", x, out);
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x);
    T* po = static_cast<T*>(out);
    parallelFor(n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        po[i] = activationElement(activation, px[i]);
    });
  });
  return Status::kSuccess;
}

Status gated(Activation activation, DType dtype, const void* gate, int64_t gate_stride,
             const void* up, int64_t up_stride, void* out, int64_t out_stride, int64_t rows,
             int64_t cols) {
  REE_CHECK_ARG(knownDType(dtype), "gated: unknown dtype %d", static_cast<int>(dtype));
  REE_CHECK_ARG(knownActivation(activation), "gated: unknown activation %d",
                static_cast<int>(activation));
  REE_CHECK_ARG(rows >= 0 && cols >= 0, "gated: bad shape rows=%lld cols=%lld",
                static_cast<long long>(rows), static_cast<long long>(cols));
  REE_CHECK_ARG(gate_stride >= cols && up_stride >= cols && out_stride >= cols,
                "gated: strides (gate %lld, up %lld, out %lld) must be >= cols %lld",
                static_cast<long long>(gate_stride), static_cast<long long>(up_stride),
                static_cast<long long>(out_stride), static_cast<long long>(cols));
  if (rows == 0 || cols == 0) return Status::kSuccess;
  REE_CHECK_ARG(gate && up && out, "gated: null pointer (gate=%p up=%p out=%p)", gate, up, out);
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* pg = static_cast<const T*>(gate);
    const T* pu = static_cast<const T*>(up);
    T* po = static_cast<T*>(out);
    int64_t grain = kGrain / cols > 0 ? kGrain / cols : 1;
    parallelFor(rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          po[r * out_stride + c] =
              gatedElement(activation, pg[r * gate_stride + c], pu[r * up_stride + c]);
        }
      }
    });
  });
  return Status::kSuccess;
}

}  // namespace ree::repops::cpu
