// The element-level pieces of the CPU repops-3 linear (int_linear_row.cpp): row exponents,
// quantisation into int16 digit planes, the exact integers P of a tile of x rows and w rows, and
// of a few x rows with a w row quantised on the fly, each in a portable scalar form and vector
// forms (AVX2; AVX-512 VNNI on 256-bit vectors) that give the same integers. Implemented in
// int_linear_row_kernels.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "ree/kernels/int_linear_row.h"

namespace ree::repops::cpu::int_linear_row_detail {

enum class SimdLevel { kScalar, kAvx2, kAvx512Vnni };

// The fastest level this CPU supports (checked once).
SimdLevel bestSimdLevel();

// Three int16 planes per operand, x (d0 2^7 + d1, d2 2^7 + d3, d2) and w (e0, e1 2^7 + e2, e1),
// stored interleaved by groups of 16 elements (one 256-bit vector): a row is [padded_k /
// 16][3][16], so that a vector loop needs one pointer per row. Rows are zero-padded to a multiple
// of 16.
constexpr int kPlanes = 3;
constexpr int kGroup = 16;

// Where element k of plane p lies in a row.
inline int64_t planeIndex(int p, int64_t k) {
  return (k / kGroup) * (kPlanes * kGroup) + p * kGroup + k % kGroup;
}

// The start of one quantised row.
struct RowPlanes {
  const int16_t* data;
  int16_t at(int p, int64_t k) const { return data[planeIndex(p, k)]; }
};

// Rows quantised with one exponent each: the exponent (int_linear_row::rowExponentOfMaxBits) and
// the planes of the digits.
struct QuantizedRows {
  int64_t padded_k = 0;
  std::vector<int32_t> exponents;  // [rows]
  std::vector<int16_t> planes;     // [rows][padded_k / 16][3][16]

  void resize(int64_t rows, int64_t k) {
    padded_k = (k + kGroup - 1) / kGroup * kGroup;
    exponents.resize(static_cast<size_t>(rows));
    planes.resize(static_cast<size_t>(rows * padded_k * kPlanes));
  }
  int16_t* rowData(int64_t r) { return planes.data() + r * padded_k * kPlanes; }
  RowPlanes row(int64_t r) const { return {planes.data() + r * padded_k * kPlanes}; }
};

// e of the k elements of `base` (dtype) from element `offset` on: the frexp exponent of the
// largest magnitude, 0 for an all-zero row, int_linear::kNonFiniteExponent with a NaN or inf.
int32_t rowExponent(const void* base, DType dtype, int64_t offset, int64_t k);

// Row `out` of q from the k elements at `offset`: its exponent (*known if given, else computed)
// and the planes of RNE(v * 2^(S - e)) (S = 27 for x, 20 for w), x's planes when is_x.
void quantizeRow(SimdLevel level, const void* base, DType dtype, int64_t offset, int64_t k,
                 bool is_x, const int32_t* known, int64_t out, QuantizedRows* q);

// The output tile the vector loops compute at once (x rows by w rows).
constexpr int kTileRows = 2;
constexpr int kTileCols = 3;

// products[r * nr + c] = P of x[r] with w[c] (r < mr, c < nr; mr <= kTileRows, nr <= kTileCols)
// over padded_k (zero-padded) elements.
void tileProducts(SimdLevel level, const RowPlanes* x, int mr, const RowPlanes* w, int nr,
                  int64_t padded_k, int64_t* products);

// For few rows of x: products[r] = P of x[r] (r < mr <= kFusedRows) with the row of w at element
// `offset` of `w` (dtype), quantised on the fly with exponent w_exponent (its digits never stored).
// Returns false (and computes nothing) where only the planes path applies: the scalar level, or a
// row whose exponent is non-finite or too far from the integer scale for the vector quantisation.
constexpr int kFusedRows = 4;
bool fusedRowProducts(SimdLevel level, const RowPlanes* x, int mr, const void* w, DType dtype,
                      int64_t offset, int64_t k, int32_t w_exponent, int64_t padded_k,
                      int64_t* products);

}  // namespace ree::repops::cpu::int_linear_row_detail
