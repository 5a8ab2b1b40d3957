// The element-level pieces of the CPU repops-3 linear (int_linear_row.cpp): row exponents,
// quantisation into int16 digit planes, and the exact integer P of one x row with up to four w
// rows, each in a portable scalar form and vector forms (AVX2; AVX-512 VNNI on 256-bit vectors)
// that give the same integers. Implemented in int_linear_row_kernels.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "ree/kernels/int_linear_row.h"

namespace ree::repops::cpu::int_linear_row_detail {

enum class SimdLevel { kScalar, kAvx2, kAvx512Vnni };

// The fastest level this CPU supports (checked once).
SimdLevel bestSimdLevel();

constexpr int kPlanes = 3;  // int16 planes per operand: x (xh, xl, xd), w (wh, wl, we)
constexpr int kLanes = 16;  // int16 lanes of a 256-bit vector: rows are zero-padded to a multiple

// Row starts of the three planes of one quantised row.
struct RowPlanes {
  const int16_t* p[kPlanes];
};

// Rows quantised with one exponent each: the exponent (int_linear_row::rowExponentOfMaxBits) and
// the three int16 planes of the digits, zero-padded to padded_k.
struct QuantizedRows {
  int64_t padded_k = 0;
  std::vector<int32_t> exponents;        // [rows]
  std::vector<int16_t> planes[kPlanes];  // [rows][padded_k] each

  void resize(int64_t rows, int64_t k) {
    padded_k = (k + kLanes - 1) / kLanes * kLanes;
    exponents.resize(static_cast<size_t>(rows));
    for (auto& plane : planes)
      plane.resize(static_cast<size_t>(rows * padded_k));
  }
  int16_t* plane(int p, int64_t row) { return planes[p].data() + row * padded_k; }
  RowPlanes row(int64_t r) const {
    return {{planes[0].data() + r * padded_k, planes[1].data() + r * padded_k,
             planes[2].data() + r * padded_k}};
  }
};

// e of the k elements of `base` (dtype) from element `offset` on: the frexp exponent of the
// largest magnitude, 0 for an all-zero row, int_linear::kNonFiniteExponent with a NaN or inf.
int32_t rowExponent(const void* base, DType dtype, int64_t offset, int64_t k);

// Row `out` of q from the k elements at `offset`: its exponent (*known if given, else computed)
// and the planes of RNE(v * 2^(S - e)) (S = 27 for x, 20 for w), x's planes when is_x.
void quantizeRow(SimdLevel level, const void* base, DType dtype, int64_t offset, int64_t k,
                 bool is_x, const int32_t* known, int64_t out, QuantizedRows* q);

// products[c] = P of x with w[c], c < count (count <= 4), over padded_k (zero-padded) elements.
void rowProducts(SimdLevel level, const RowPlanes& x, const RowPlanes* w, int count,
                 int64_t padded_k, int64_t* products);

}  // namespace ree::repops::cpu::int_linear_row_detail
