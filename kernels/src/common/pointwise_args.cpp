#include "pointwise_args.h"

#include "dtype_dispatch.h"

namespace ree::repops {
namespace {

bool knownActivation(Activation activation) {
  return activation == Activation::kSilu || activation == Activation::kGeluErf ||
         activation == Activation::kGeluTanh;
}

}  // namespace

Status validateEmbeddingArgs(DType dtype, const void* table, int64_t vocab, int64_t dim,
                             const int32_t* ids, int64_t count, const void* out) {
  REE_CHECK_ARG(isStorageType(dtype), "embedding: unknown dtype %d", static_cast<int>(dtype));
  REE_CHECK_ARG(
      vocab > 0 && dim > 0 && count >= 0, "embedding: bad shape vocab=%lld dim=%lld count=%lld",
      static_cast<long long>(vocab), static_cast<long long>(dim), static_cast<long long>(count));
  if (count == 0) return Status::kSuccess;
  REE_CHECK_ARG(table && ids && out, "embedding: null pointer (table=%p ids=%p out=%p)", table,
                static_cast<const void*>(ids), out);
  return Status::kSuccess;
}

Status validateEmbeddingIds(const int32_t* ids, int64_t count, int64_t vocab) {
  for (int64_t i = 0; i < count; ++i) {
    REE_CHECK_ARG(ids[i] >= 0 && ids[i] < vocab,
                  "embedding: ids[%lld] = %d is outside the vocabulary [0, %lld)",
                  static_cast<long long>(i), ids[i], static_cast<long long>(vocab));
  }
  return Status::kSuccess;
}

Status validateBinaryArgs(const char* name, DType dtype, const void* a, const void* b,
                          const void* out, int64_t n) {
  REE_CHECK_ARG(isStorageType(dtype), "%s: unknown dtype %d", name, static_cast<int>(dtype));
  REE_CHECK_ARG(n >= 0, "%s: n must be >= 0, got %lld", name, static_cast<long long>(n));
  if (n == 0) return Status::kSuccess;
  REE_CHECK_ARG(a && b && out, "%s: null pointer (a=%p b=%p out=%p)", name, a, b, out);
  return Status::kSuccess;
}

Status validateActivationArgs(Activation activation, DType dtype, const void* x, const void* out,
                              int64_t n) {
  REE_CHECK_ARG(isStorageType(dtype), "activation: unknown dtype %d", static_cast<int>(dtype));
  REE_CHECK_ARG(knownActivation(activation), "activation: unknown kind %d",
                static_cast<int>(activation));
  REE_CHECK_ARG(n >= 0, "activation: n must be >= 0, got %lld", static_cast<long long>(n));
  if (n == 0) return Status::kSuccess;
  REE_CHECK_ARG(x && out, "activation: null pointer (x=%p out=%p)", x, out);
  return Status::kSuccess;
}

Status validateGatedArgs(Activation activation, DType dtype, const void* gate, int64_t gate_stride,
                         const void* up, int64_t up_stride, const void* out, int64_t out_stride,
                         int64_t rows, int64_t cols) {
  REE_CHECK_ARG(isStorageType(dtype), "gated: unknown dtype %d", static_cast<int>(dtype));
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
  return Status::kSuccess;
}

}  // namespace ree::repops
