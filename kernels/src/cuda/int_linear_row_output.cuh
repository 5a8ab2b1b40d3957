// repops-3 linear (int_linear_row.h): the last steps of one output, shared by the skinny kernel
// and the GEMM epilogue: the exact integer P from the four shift-class sums, its one rounding
// (dotOf), then repops-1's bias, NaN canonicalisation, output rounding and accumulate.
// Included by int_linear_row.cu; not a header of its own.
#pragma once

#include <cstdint>

#include "common/storage_element.h"
#include "ree/kernels/int_linear_row.h"

namespace ree::repops::cuda {
namespace {

// Where the outputs go and the exponents they are scaled with.
struct RowOutputArgs {
  const int32_t* x_exponents;  // [m] (indexed by the global row)
  const int32_t* w_exponents;  // [n]
  const void* bias;            // [n] or null
  DType bias_dtype;
  void* y;
  int64_t y_stride;
  int m, n;
  int y_is_bf16;
  int accumulate;
};

// Y[row, col] from the class sums c21 = sum d0 e0, c14, c7, c0 over the whole K.
__device__ __forceinline__ void storeRowOutput(const RowOutputArgs& a, int row, int col,
                                               int32_t c21, int32_t c14, int32_t c7, int32_t c0) {
  const int64_t product = int_linear::combineShiftClasses(c21, c14, c7, c0);
  const float dot = int_linear_row::dotOf(product, a.x_exponents[row], a.w_exponents[col]);
  const bool has_bias = a.bias != nullptr;
  const float bias = has_bias ? loadStorageElement(a.bias, a.bias_dtype, col) : 0.0f;
  detail::linearStore(a.y, a.y_is_bf16, static_cast<int64_t>(row) * a.y_stride + col,
                      detail::linearFinish(dot, has_bias, bias), a.accumulate);
}

}  // namespace
}  // namespace ree::repops::cuda
