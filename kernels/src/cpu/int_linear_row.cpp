// CPU repops-3 linear (docs/repops-spec/linear-int-row.md), the reference of the row-exponent
// integer path.
//
// Each row of x and w has one exponent over the whole K (int_linear_row.h). The integers are
// written as three int16 planes, x = (xh, xl, d2) = (d0 * 2^7 + d1, d2 * 2^7 + d3, d2) and
// w = (e0, wl, e1) = (e0, e1 * 2^7 + e2, e1), so that the exact integer of an output is
//   P = 2^14 sum xh e0 + sum (xh wl + xl e0 + d2 e1),
// which expands to exactly the nine kept digit pairs (d0e0 2^21; d0e1, d1e0 2^14; d0e2, d1e1,
// d2e0 2^7; d1e2, d2e1, d3e0 2^0). Every product is int16 x int16 (pmaddwd / vpdpwssd when
// vectorised) and every sum is exact, so the vector and scalar loops give the same P, which is
// rounded once (int_linear_row::dotOf). Work is split over (24 outputs) x (64 rows) tasks; x is
// quantised once per call, w once per task panel, or for M <= 4 (decode) inside the product loop
// (int_linear_row_simd.h). Prepared weights hold the row exponents of w.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "common/storage_element.h"
#include "cpu/int_linear_row_simd.h"
#include "ree/core/parallel.h"
#include "ree/kernels/int_linear_row.h"

namespace ree::repops {

namespace cpu {
namespace {

using int_linear_row_detail::QuantizedRows;
using int_linear_row_detail::RowPlanes;
using int_linear_row_detail::SimdLevel;

constexpr int kPanel = 24;     // output features per task (a multiple of kTileCols)
constexpr int kTaskRows = 64;  // rows of x per task

std::atomic<bool> g_simd_enabled{true};
std::atomic<bool> g_avx512_enabled{true};

SimdLevel simdLevel() {
  if (!g_simd_enabled.load()) return SimdLevel::kScalar;
  const SimdLevel best = int_linear_row_detail::bestSimdLevel();
  if (best == SimdLevel::kAvx512Vnni && !g_avx512_enabled.load()) return SimdLevel::kAvx2;
  return best;
}

// Rows [row_begin, row_end) of a [rows, K] matrix with row stride `stride` into q's rows
// out_first, out_first + 1, ... (x's planes when is_x, else w's). With `exponents` (prepared
// weights), the row exponents are taken from there instead of being computed.
void quantizeRows(SimdLevel level, const void* base, DType dtype, int64_t stride, int64_t k,
                  bool is_x, int64_t row_begin, int64_t row_end, int64_t out_first,
                  const int32_t* exponents, QuantizedRows* q) {
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t out = out_first + (row - row_begin);
    const int32_t* known = exponents ? exponents + row : nullptr;
    int_linear_row_detail::quantizeRow(level, base, dtype, row * stride, k, is_x, known, out, q);
  }
}

// The exact integers P of x rows [m0, m1) (of xq) with the panel's `count` w rows (wq's rows
// w0 ..) as dots[(m - m0) * kPanel + c] = dotOf(P, e_x, e_w), a tile of rows and columns at once.
void taskDots(SimdLevel level, const QuantizedRows& xq, int64_t m0, int64_t m1,
              const QuantizedRows& wq, int64_t w0, int count, float* dots) {
  using int_linear_row_detail::kTileCols;
  using int_linear_row_detail::kTileRows;
  for (int64_t mt = m0; mt < m1; mt += kTileRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kTileRows, m1 - mt));
    RowPlanes x[kTileRows];
    for (int r = 0; r < rows; ++r)
      x[r] = xq.row(mt + r);
    for (int c0 = 0; c0 < count; c0 += kTileCols) {
      const int cols = std::min(kTileCols, count - c0);
      RowPlanes w[kTileCols];
      for (int c = 0; c < cols; ++c)
        w[c] = wq.row(w0 + c0 + c);
      int64_t products[kTileRows * kTileCols];
      int_linear_row_detail::tileProducts(level, x, rows, w, cols, xq.padded_k, products);
      for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) {
          dots[(mt + r - m0) * kPanel + c0 + c] = int_linear_row::dotOf(
              products[r * cols + c], xq.exponents[static_cast<size_t>(mt + r)],
              wq.exponents[static_cast<size_t>(w0 + c0 + c)]);
        }
      }
    }
  }
}

// For at most kFusedRows rows of x (decode): each w row of the panel is quantised on the fly
// inside the product loop (its digits never stored), except rows the vector quantisation cannot
// take (non-finite, extreme exponents), which go through the planes in `spare`. The dots go to
// dots[m * kPanel + c].
void fusedTaskDots(SimdLevel level, const LinearArgs& a, const QuantizedRows& xq, int64_t n0,
                   int count, const int32_t* w_exponents, QuantizedRows* spare, float* dots) {
  const int rows = static_cast<int>(a.m);
  RowPlanes x[int_linear_row_detail::kFusedRows];
  for (int r = 0; r < rows; ++r)
    x[r] = xq.row(r);
  for (int c = 0; c < count; ++c) {
    const int64_t n = n0 + c, offset = n * a.wStride();
    const int32_t exponent = w_exponents
                                 ? w_exponents[n]
                                 : int_linear_row_detail::rowExponent(a.w, a.w_dtype, offset, a.k);
    int64_t products[int_linear_row_detail::kFusedRows];
    if (!int_linear_row_detail::fusedRowProducts(level, x, rows, a.w, a.w_dtype, offset, a.k,
                                                 exponent, xq.padded_k, products)) {
      spare->resize(1, a.k);
      int_linear_row_detail::quantizeRow(level, a.w, a.w_dtype, offset, a.k, /*is_x=*/false,
                                         &exponent, 0, spare);
      const RowPlanes w = spare->row(0);
      for (int r = 0; r < rows; ++r)
        int_linear_row_detail::tileProducts(level, x + r, 1, &w, 1, xq.padded_k, products + r);
    }
    for (int r = 0; r < rows; ++r) {
      dots[r * kPanel + c] =
          int_linear_row::dotOf(products[r], xq.exponents[static_cast<size_t>(r)], exponent);
    }
  }
}

// Bias, NaN canonicalisation, output rounding and accumulate (repops-1's steps) for the task's
// outputs.
void storeTask(const LinearArgs& a, int64_t m0, int64_t m1, int64_t n0, int count,
               const float* dots) {
  const int64_t y_stride = a.yStride();
  for (int64_t m = m0; m < m1; ++m) {
    for (int c = 0; c < count; ++c) {
      const int64_t n = n0 + c;
      const float bias = a.bias ? loadStorageElement(a.bias, a.bias_dtype, n) : 0.0f;
      detail::linearStore(
          a.y, a.y_dtype == DType::kBF16, m * y_stride + n,
          detail::linearFinish(dots[(m - m0) * kPanel + c], a.bias != nullptr, bias), a.accumulate);
    }
  }
}

}  // namespace

void setIntLinearRowSimdEnabled(bool enabled) {
  g_simd_enabled.store(enabled);
}

void setIntLinearRowAvx512Enabled(bool enabled) {
  g_avx512_enabled.store(enabled);
}

struct IntLinearRowWeights::Impl {
  std::vector<int32_t> exponents;  // e_w(n): the integers are made from args.w per call
};

IntLinearRowWeights::IntLinearRowWeights() : impl_(std::make_unique<Impl>()) {}
IntLinearRowWeights::~IntLinearRowWeights() = default;
int64_t IntLinearRowWeights::rows() const {
  return rows_;
}
int64_t IntLinearRowWeights::k() const {
  return k_;
}

int64_t intLinearRowWeightsBytes(int64_t n, int64_t k) {
  (void)k;
  return n * static_cast<int64_t>(sizeof(int32_t));
}

Status prepareIntLinearRowWeights(const LinearArgs& a, std::unique_ptr<IntLinearRowWeights>* out) {
  REE_CHECK_ARG(out != nullptr, "prepareIntLinearRowWeights: out is null");
  REE_CHECK_ARG(a.w != nullptr && a.n >= 1 && a.k >= 1,
                "prepareIntLinearRowWeights: w must be a non-empty [n, k] matrix (n=%lld, k=%lld)",
                static_cast<long long>(a.n), static_cast<long long>(a.k));
  auto prepared = std::unique_ptr<IntLinearRowWeights>(new IntLinearRowWeights());
  prepared->rows_ = a.n;
  prepared->k_ = a.k;
  std::vector<int32_t>& exponents = prepared->impl_->exponents;
  exponents.resize(static_cast<size_t>(a.n));
  const int64_t stride = a.wStride();
  parallelFor(a.n, 64, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      exponents[static_cast<size_t>(row)] =
          int_linear_row_detail::rowExponent(a.w, a.w_dtype, row * stride, a.k);
    }
  });
  *out = std::move(prepared);
  return Status::kSuccess;
}

Status intLinearRow(const LinearArgs& a) {
  return intLinearRow(a, nullptr);
}

Status intLinearRow(const LinearArgs& a, const IntLinearRowWeights* prepared) {
  REE_RETURN_IF_ERROR(validateIntLinearRowArgs(a));
  REE_CHECK_ARG(prepared == nullptr || (prepared->rows() == a.n && prepared->k() == a.k),
                "intLinearRow: prepared weights of [%lld, %lld] for a [%lld, %lld] w",
                static_cast<long long>(prepared ? prepared->rows() : 0),
                static_cast<long long>(prepared ? prepared->k() : 0), static_cast<long long>(a.n),
                static_cast<long long>(a.k));
  if (a.m == 0) return Status::kSuccess;
  const SimdLevel level = simdLevel();
  const int32_t* w_exponents = prepared ? prepared->impl_->exponents.data() : nullptr;

  QuantizedRows xq;
  xq.resize(a.m, a.k);
  parallelFor(a.m, 4, [&](int64_t begin, int64_t end) {
    quantizeRows(level, a.x, a.x_dtype, a.xStride(), a.k, /*is_x=*/true, begin, end, begin, nullptr,
                 &xq);
  });

  const int64_t panels = (a.n + kPanel - 1) / kPanel;
  const int64_t row_tasks = (a.m + kTaskRows - 1) / kTaskRows;
  const bool fused = level != SimdLevel::kScalar && a.m <= int_linear_row_detail::kFusedRows;
  parallelFor(panels * row_tasks, 1, [&](int64_t task_begin, int64_t task_end) {
    QuantizedRows wq;  // this thread's panel of w, quantised once per panel
    int64_t quantized_panel = -1;
    for (int64_t task = task_begin; task < task_end; ++task) {
      const int64_t panel = task / row_tasks;
      const int64_t n0 = panel * kPanel;
      const int count = static_cast<int>(std::min<int64_t>(kPanel, a.n - n0));
      float dots[kTaskRows * kPanel];
      if (fused) {
        fusedTaskDots(level, a, xq, n0, count, w_exponents, &wq, dots);
        storeTask(a, 0, a.m, n0, count, dots);
        continue;
      }
      if (panel != quantized_panel) {
        wq.resize(kPanel, a.k);
        quantizeRows(level, a.w, a.w_dtype, a.wStride(), a.k, /*is_x=*/false, n0, n0 + count, 0,
                     w_exponents, &wq);
        quantized_panel = panel;
      }
      const int64_t m0 = (task % row_tasks) * kTaskRows;
      const int64_t m1 = std::min(a.m, m0 + kTaskRows);
      taskDots(level, xq, m0, m1, wq, 0, count, dots);
      storeTask(a, m0, m1, n0, count, dots);
    }
  });
  return Status::kSuccess;
}

}  // namespace cpu
}  // namespace ree::repops
