// Problems shared by the integer linear tests (repops-2 intLinear and repops-3 intLinearRow, CPU
// and CUDA): x, w, bias and y of one call drawn from one seed (linear_problem.h's hostile
// values), a row of a batch as a problem of its own, the special-value rows of the CUDA tests,
// and the accuracy study's Llama-like operands with their long-double reference. One copy, so
// that a CPU test and the CUDA test that compares against it build their problems the same way.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/linear_problem.h"
#include "test_util.h"

namespace ree::test {

// Which tensors fill() draws that a call may not read. Each test keeps the choice it was written
// with, so that its seeds give the data they always gave.
struct IntLinearDraws {
  bool bias_always = true;  // a bias even without has_bias (the GPU gets a valid pointer)
  bool y_always = false;    // random y_init even when not accumulating (else zeros)
};

// The inputs of one intLinear / intLinearRow call: `Buffer` is HostBuffer, or MirroredBuffer in
// the CUDA tests (device copies made by upload()).
template <typename Buffer>
struct IntLinearProblem : LinearShape {
  Buffer x, w, bias, y_init;
  IntLinearDraws draws;

  // hostile: special values in some rows; non_finite: NaN/inf in a few rows of x and w.
  void fill(uint64_t seed, bool hostile, bool non_finite) {
    std::mt19937_64 rng(seed);
    fillHostileInputs(rng, *this, hostile, non_finite, x, w);
    if (has_bias || draws.bias_always) {
      bias.reset(bias_dtype, static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        bias.set(static_cast<size_t>(i), hostileValue(rng, 0.5f, false));
    }
    const bool random_y = accumulate || draws.y_always;
    y_init.reset(y_dtype, static_cast<size_t>(m * ys()));
    for (size_t i = 0; i < static_cast<size_t>(m * ys()); ++i)
      y_init.set(i, random_y ? hostileValue(rng, 1.0f, false) : 0.0f);
  }
};

// For a problem whose dtypes are set, drawn from rng in this order: M in [1, max_m], an odd N in
// [1, 2 * half_n - 1], K in [1, max_k], then randomizeIntLinearLayout, then fill() from the next
// draw.
template <typename Problem>
void drawOddShape(std::mt19937_64& rng, Problem& p, uint64_t max_m, uint64_t half_n, uint64_t max_k,
                  bool hostile, bool non_finite) {
  p.m = 1 + static_cast<int64_t>(rng() % max_m);
  p.n = 1 + 2 * static_cast<int64_t>(rng() % half_n);
  p.k = 1 + static_cast<int64_t>(rng() % max_k);
  randomizeIntLinearLayout(rng, p);
  p.fill(rng(), hostile, non_finite);
}

// The two problems of the golden-hash pins: bf16 x, w and bias, 7 x 33 x 300, hostile values
// (seed 2024); then fp32 x, f16 w, bf16 y, no bias, with NaN and inf (seed 2025).
template <typename Problem>
void goldenPinProblems(Problem* p, Problem* q) {
  p->m = 7;
  p->n = 33;
  p->k = 300;
  p->x_dtype = DType::kBF16;
  p->w_dtype = DType::kBF16;
  p->has_bias = true;
  p->bias_dtype = DType::kBF16;
  p->fill(2024, true, false);
  *q = *p;
  q->x_dtype = DType::kF32;
  q->w_dtype = DType::kF16;
  q->y_dtype = DType::kBF16;
  q->has_bias = false;
  q->fill(2025, true, true);
}

// What every integer linear refuses (k = 0, f16 x) and the empty batch it accepts (m = 0, no
// x), through `call(args)` (cpu::intLinear, cpu::intLinearRow).
template <typename Problem, typename Call>
void expectBadArgumentsRejected(Call&& call) {
  Problem p;
  p.fill(1, false, false);
  std::vector<float> y(4);
  repops::LinearArgs a = p.args(y.data());
  a.k = 0;
  EXPECT_EQ(call(a), Status::kInvalidArgument);
  a = p.args(y.data());
  a.x_dtype = DType::kF16;
  EXPECT_EQ(call(a), Status::kInvalidArgument);
  a = p.args(y.data());
  a.m = 0;
  a.x = nullptr;
  EXPECT_EQ(call(a), Status::kSuccess);
}

// Row `row` of the dense batch `p` (x rows of p.k elements, not accumulating) as a problem of one
// row: the same w and bias, y_init of one row.
template <typename Problem>
Problem rowAlone(const Problem& p, int64_t row) {
  Problem one = p;
  one.m = 1;
  const size_t row_bytes = static_cast<size_t>(p.k) * dtypeSize(p.x_dtype);
  one.x = HostBuffer(p.x_dtype, static_cast<size_t>(p.k));
  std::memcpy(one.x.bytes.data(), p.x.bytes.data() + row * row_bytes, row_bytes);
  one.y_init = HostBuffer(p.y_dtype, static_cast<size_t>(p.n));
  return one;
}

// The special rows of the CUDA tests' SpecialValuesMatchCpu (k = 300): a NaN in x row 0, inf in x
// row 1 and -inf in w row 2; x rows of subnormals (2), huge and tiny values with zeros (3), signed
// zeros (4); and the largest digits: |W| rounding up to 2^20 (w rows 3 and 4) against x integers
// reaching 2^27 - 8 (x row 5).
template <typename Problem>
void setSpecialRows(Problem& p) {
  p.x.set(0 * 300 + 3, NAN);
  p.x.set(1 * 300 + 299, INFINITY);
  p.w.set(2 * 300 + 128, -INFINITY);
  for (int i = 0; i < 300; ++i) {
    p.x.set(static_cast<size_t>(2 * 300 + i), bitsFloat(1u + static_cast<uint32_t>(i)));
    p.x.set(static_cast<size_t>(3 * 300 + i), i == 5 ? 3e38f : (i % 2 ? 1e-38f : 0.0f));
    p.x.set(static_cast<size_t>(4 * 300 + i), i % 2 ? -0.0f : 0.0f);
    p.w.set(static_cast<size_t>(3 * 300 + i), (i % 3 ? 1.0f : -1.0f) * 0.99999994f);
    p.w.set(static_cast<size_t>(4 * 300 + i), -0.99999994f);
    p.x.set(static_cast<size_t>(5 * 300 + i), (i % 5 ? -1.0f : 1.0f) * 0.99999994f);
  }
}

// A row's bits do not depend on the batch it is in: a 200-row batch (bf16 x, bias, k = 1000) and
// runs of 1, 7, 64 and 65 of its rows, from its start and its end. `run(p)` returns the output
// bytes of p (y_init is overwritten: not accumulating). Problem: an IntLinearProblem.
template <typename Problem, typename Run>
void expectRowsInvariantToBatch(Run&& run) {
  Problem full;
  full.m = 200;
  full.n = 97;
  full.k = 1000;
  full.x_dtype = DType::kBF16;
  full.has_bias = true;
  full.fill(5, true, false);
  const std::vector<uint8_t> y_full = run(full);
  for (int64_t rows : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{65}}) {
    for (int64_t first : {int64_t{0}, int64_t{200} - rows}) {
      Problem part;
      part.m = rows;
      part.n = full.n;
      part.k = full.k;
      part.x_dtype = full.x_dtype;
      part.has_bias = true;
      part.fill(5, true, false);  // sizes the tensors; x rows, w and bias are copied below
      part.w.bytes = full.w.bytes;
      part.bias.bytes = full.bias.bytes;
      part.x.bytes.assign(full.x.bytes.begin() + first * full.k * 2,
                          full.x.bytes.begin() + (first + rows) * full.k * 2);
      const std::vector<uint8_t> y = run(part);
      EXPECT_EQ(std::memcmp(y.data(), y_full.data() + first * full.n * 4, rows * full.n * 4), 0)
          << rows << " rows from " << first;
    }
  }
}

// ---- The accuracy study: Llama-like operands against a long-double reference.

// x ~ N(0, 1) fp32, m x k, with 1% outlier channels scaled by `outlier` (the same channels in
// every row); w ~ N(0, 0.02), n x k of `w_dtype`. The generator is seeded by k and w_dtype.
struct LlamaLikeOperands {
  int64_t m = 0, n = 0, k = 0;
  HostBuffer x, w;

  LlamaLikeOperands(int64_t rows, int64_t cols, int64_t depth, DType w_dtype, float outlier)
      : m(rows), n(cols), k(depth) {
    std::mt19937_64 rng(static_cast<uint64_t>(k) + static_cast<uint64_t>(w_dtype));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<bool> outliers(static_cast<size_t>(k));
    for (auto&& o : outliers)
      o = rng() % 100 == 0;
    x.reset(DType::kF32, static_cast<size_t>(m * k));
    w.reset(w_dtype, static_cast<size_t>(n * k));
    for (int64_t i = 0; i < m * k; ++i)
      x.set(static_cast<size_t>(i),
            normal(rng) * (outliers[static_cast<size_t>(i % k)] ? outlier : 1.0f));
    for (int64_t i = 0; i < n * k; ++i)
      w.set(static_cast<size_t>(i), normal(rng) * 0.02f);
  }

  // Dense fp32 x, w, fp32 y: the arguments of one call writing m x n floats to `y`.
  repops::LinearArgs args(float* y) const {
    repops::LinearArgs a;
    a.x = x.data();
    a.x_dtype = DType::kF32;
    a.w = w.data();
    a.w_dtype = w.dtype;
    a.y = y;
    a.m = m;
    a.n = n;
    a.k = k;
    return a;
  }

  // The dots in long double, rounded to double (`exact`), and sum |x w| (`magnitude`), row-major.
  void reference(std::vector<double>* exact, std::vector<double>* magnitude) const {
    exact->assign(static_cast<size_t>(m * n), 0.0);
    magnitude->assign(exact->size(), 0.0);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        long double sum = 0, mag = 0;
        for (int64_t i = 0; i < k; ++i) {
          const long double product =
              static_cast<long double>(x.at(static_cast<size_t>(r * k + i))) *
              w.at(static_cast<size_t>(c * k + i));
          sum += product;
          mag += std::fabs(product);
        }
        (*exact)[static_cast<size_t>(r * n + c)] = static_cast<double>(sum);
        (*magnitude)[static_cast<size_t>(r * n + c)] = static_cast<double>(mag);
      }
    }
  }
};

struct ErrorStats {
  double median = 0, max = 0, max_normwise = 0;
};

// Relative errors |y - exact| / |exact| (median, max) and the largest |y - exact| / sum |x w|.
inline ErrorStats errorsOf(const std::vector<float>& y, const std::vector<double>& exact,
                           const std::vector<double>& magnitude) {
  std::vector<double> rel;
  ErrorStats s;
  for (size_t i = 0; i < y.size(); ++i) {
    const double err = std::fabs(static_cast<double>(y[i]) - exact[i]);
    if (exact[i] != 0.0) rel.push_back(err / std::fabs(exact[i]));
    s.max_normwise = std::max(s.max_normwise, err / magnitude[i]);
  }
  std::sort(rel.begin(), rel.end());
  s.median = rel[rel.size() / 2];
  s.max = rel.back();
  return s;
}

}  // namespace ree::test
