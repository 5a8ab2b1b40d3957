// validateLinearArgs (linear.h): the checks of a linear call, shared by the CPU and CUDA entry
// points.
#include <cstdint>

#include "common/dtype_dispatch.h"
#include "ree/kernels/linear.h"

namespace ree::repops {
namespace {

bool rangesOverlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  if (a == nullptr || b == nullptr || a_bytes <= 0 || b_bytes <= 0) return false;
  auto a0 = reinterpret_cast<uintptr_t>(a);
  auto b0 = reinterpret_cast<uintptr_t>(b);
  return a0 < b0 + static_cast<uintptr_t>(b_bytes) && b0 < a0 + static_cast<uintptr_t>(a_bytes);
}

int64_t matrixBytes(int64_t rows, int64_t cols, int64_t stride, DType dtype) {
  if (rows <= 0 || cols <= 0) return 0;
  return ((rows - 1) * stride + cols) * dtypeSize(dtype);
}

}  // namespace

Status validateLinearArgs(const LinearArgs& a) {
  REE_CHECK_ARG(a.x_dtype == DType::kF32 || a.x_dtype == DType::kBF16,
                "linear: x_dtype must be f32 or bf16 (got %d)", static_cast<int>(a.x_dtype));
  REE_CHECK_ARG(isStorageType(a.w_dtype), "linear: w_dtype must be f32, bf16 or f16 (got %d)",
                static_cast<int>(a.w_dtype));
  REE_CHECK_ARG(a.y_dtype == DType::kF32 || a.y_dtype == DType::kBF16,
                "linear: y_dtype must be f32 or bf16 (got %d)", static_cast<int>(a.y_dtype));
  REE_CHECK_ARG(a.bias == nullptr || a.bias_dtype == DType::kF32 || a.bias_dtype == a.w_dtype,
                "linear: bias_dtype must be f32 or w_dtype (%s), got %d", dtypeName(a.w_dtype),
                static_cast<int>(a.bias_dtype));
  REE_CHECK_ARG(a.m >= 0 && a.m <= INT32_MAX, "linear: m must be in [0, 2^31) (got %lld)",
                static_cast<long long>(a.m));
  REE_CHECK_ARG(a.n >= 1 && a.n <= INT32_MAX, "linear: n must be in [1, 2^31) (got %lld)",
                static_cast<long long>(a.n));
  REE_CHECK_ARG(a.k >= 1 && a.k <= INT32_MAX, "linear: k must be in [1, 2^31) (got %lld)",
                static_cast<long long>(a.k));
  REE_CHECK_ARG(a.x_row_stride == 0 || a.x_row_stride >= a.k,
                "linear: x_row_stride must be 0 or >= k=%lld (got %lld)",
                static_cast<long long>(a.k), static_cast<long long>(a.x_row_stride));
  REE_CHECK_ARG(a.w_row_stride == 0 || a.w_row_stride >= a.k,
                "linear: w_row_stride must be 0 or >= k=%lld (got %lld)",
                static_cast<long long>(a.k), static_cast<long long>(a.w_row_stride));
  REE_CHECK_ARG(a.y_row_stride == 0 || a.y_row_stride >= a.n,
                "linear: y_row_stride must be 0 or >= n=%lld (got %lld)",
                static_cast<long long>(a.n), static_cast<long long>(a.y_row_stride));
  REE_CHECK_ARG(a.w != nullptr, "linear: w is null");
  if (a.m > 0) {
    REE_CHECK_ARG(a.x != nullptr, "linear: x is null (m=%lld)", static_cast<long long>(a.m));
    REE_CHECK_ARG(a.y != nullptr, "linear: y is null (m=%lld)", static_cast<long long>(a.m));
    int64_t x_stride = a.x_row_stride ? a.x_row_stride : a.k;
    int64_t w_stride = a.w_row_stride ? a.w_row_stride : a.k;
    int64_t y_stride = a.y_row_stride ? a.y_row_stride : a.n;
    int64_t y_bytes = matrixBytes(a.m, a.n, y_stride, a.y_dtype);
    REE_CHECK_ARG(!rangesOverlap(a.y, y_bytes, a.x, matrixBytes(a.m, a.k, x_stride, a.x_dtype)),
                  "linear: y overlaps x");
    REE_CHECK_ARG(!rangesOverlap(a.y, y_bytes, a.w, matrixBytes(a.n, a.k, w_stride, a.w_dtype)),
                  "linear: y overlaps w");
    REE_CHECK_ARG(!rangesOverlap(a.y, y_bytes, a.bias, matrixBytes(1, a.n, a.n, a.bias_dtype)),
                  "linear: y overlaps bias");
  }
  return Status::kSuccess;
}

}  // namespace ree::repops
