// CPU repops-2 linear (docs/repops-spec/linear-int.md) against (a) an independent brute-force
// reference written from the spec text (frexp, ldexp, nearbyint, __int128 block sums) bitwise on
// random odd shapes with special values, (b) itself: a row alone and inside any batch, any thread
// count, SIMD on and off, (c) fp64 on Llama-like data, beside repops-1 (accuracy table), and (d) a
// golden hash of fixed inputs (spec stability).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/linear_problem.h"
#include "ree/core/parallel.h"
#include "ree/kernels/int_linear.h"
#include "ree/kernels/linear.h"
#include "test_util.h"

namespace ree::repops {
namespace {

using Buffer = test::HostBuffer;

struct Problem : test::LinearShape {
  Buffer x, w, bias, y_init;

  // hostile: special values in some rows; non_finite: NaN/inf in a few rows of x and w.
  void fill(uint64_t seed, bool hostile, bool non_finite) {
    std::mt19937_64 rng(seed);
    test::fillHostileInputs(rng, *this, hostile, non_finite, x, w);
    if (has_bias) {
      bias = Buffer(bias_dtype, static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        bias.set(static_cast<size_t>(i), test::hostileValue(rng, 0.5f, false));
    }
    y_init = Buffer(y_dtype, static_cast<size_t>(m * ys()));
    for (size_t i = 0; i < static_cast<size_t>(m * ys()); ++i)
      y_init.set(i, accumulate ? test::hostileValue(rng, 1.0f, false) : 0.0f);
  }

  LinearArgs args(void* y) const { return LinearShape::args(x.data(), w.data(), bias.data(), y); }

  Buffer run() const {
    Buffer y = y_init;
    Status status = cpu::intLinear(args(y.bytes.data()));
    EXPECT_EQ(status, Status::kSuccess) << lastErrorMessage();
    return y;
  }
};

// ---- The brute-force reference, written from the spec text with libm and __int128 only.

// frexp's exponent of the block's largest magnitude (0 for an all-zero block).
int specExponent(const std::vector<double>& block) {
  double max_abs = 0.0;
  for (double v : block)
    max_abs = std::max(max_abs, std::fabs(v));
  if (max_abs == 0.0) return 0;
  int e = 0;
  std::frexp(max_abs, &e);
  return e;
}

// The dot of the spec before bias: NaN if any input is NaN or infinite, else the blocks' exact
// integer products summed in increasing order in binary64, then rounded to float.
float specDot(const std::vector<double>& x, const std::vector<double>& w, int sx, int sw) {
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(w[i])) return NAN;
  }
  double acc = 0.0;
  for (size_t begin = 0; begin < x.size(); begin += 128) {
    size_t end = std::min(x.size(), begin + 128);
    std::vector<double> xb(x.begin() + begin, x.begin() + end);
    std::vector<double> wb(w.begin() + begin, w.begin() + end);
    int ex = specExponent(xb), ew = specExponent(wb);
    __int128 product = 0;
    for (size_t i = 0; i < xb.size(); ++i) {
      // ldexp is exact (a power of two, no underflow in binary64); nearbyint rounds to nearest
      // even in the default rounding mode.
      auto xi = static_cast<int64_t>(std::nearbyint(std::ldexp(xb[i], sx - ex)));
      auto wi = static_cast<int64_t>(std::nearbyint(std::ldexp(wb[i], sw - ew)));
      product += static_cast<__int128>(xi) * wi;
    }
    volatile double term =
        static_cast<double>(static_cast<int64_t>(product)) * std::ldexp(1.0, ex + ew - sx - sw);
    acc = acc + term;
  }
  return static_cast<float>(acc);
}

std::vector<double> rowOf(const Buffer& b, int64_t row, int64_t stride, int64_t k) {
  std::vector<double> out(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i)
    out[static_cast<size_t>(i)] = b.at(static_cast<size_t>(row * stride + i));
  return out;
}

// The stored bits of output (row, col): bias, NaN canonicalisation, rounding and accumulate as in
// repops-1 (linear.md steps 3-5).
uint32_t specBits(const Problem& p, int64_t row, int64_t col) {
  float dot = specDot(rowOf(p.x, row, p.xs(), p.k), rowOf(p.w, col, p.ws(), p.k),
                      int_linear::kXShift, int_linear::kWShift);
  float b = p.has_bias ? p.bias.at(static_cast<size_t>(col)) : 0.0f;
  float v = detail::linearFinish(dot, p.has_bias, b);
  size_t i = static_cast<size_t>(row * p.ys() + col);
  if (p.y_dtype == DType::kF32) {
    return floatBits(p.accumulate ? detail::linearAccumulate(p.y_init.at(i), v) : v);
  }
  float rounded = toFloat(toBF16(v));
  return toBF16(p.accumulate ? detail::linearAccumulate(p.y_init.at(i), rounded) : v).bits;
}

void checkSpecBits(const Problem& p, const Buffer& y) {
  for (int64_t row = 0; row < p.m; ++row) {
    for (int64_t col = 0; col < p.n; ++col) {
      size_t i = static_cast<size_t>(row * p.ys() + col);
      ASSERT_EQ(y.bitsAt(i), specBits(p, row, col))
          << p.describe() << " at (" << row << "," << col << ") got " << y.at(i);
    }
  }
}

class Restore {
 public:
  ~Restore() {
    setCpuThreads(0);
    cpu::setIntLinearSimdEnabled(true);
  }
};

// (a) Random odd shapes, every dtype combination, special values: bitwise equal to the spec.
TEST(IntLinearCpu, RandomShapesMatchBruteForceSpec) {
  std::mt19937_64 rng(23);
  int cases = 0;
  test::forEachLinearDtypes([&](DType x_dtype, DType w_dtype, DType y_dtype) {
    for (int rep = 0; rep < 3; ++rep) {
      Problem p;
      p.setDtypes(x_dtype, w_dtype, y_dtype);
      p.m = rep == 0 ? 1 + static_cast<int64_t>(rng() % 300) : 1 + static_cast<int64_t>(rng() % 9);
      p.n = 1 + 2 * static_cast<int64_t>(rng() % (rep == 0 ? 6 : 20));
      p.k = 1 + static_cast<int64_t>(rng() % 700);
      test::randomizeIntLinearLayout(rng, p);
      p.fill(rng(), /*hostile=*/rep != 2, /*non_finite=*/rep == 1);
      Buffer y = p.run();
      checkSpecBits(p, y);
      if (HasFatalFailure()) return false;
      ++cases;
    }
    return true;
  });
  if (HasFatalFailure()) return;
  EXPECT_EQ(cases, 36);
}

// Special values spelled out: NaN and inf anywhere in a dot give 0x7fc00000 (also with a bias and
// into bf16); a row without them is unaffected; zeros give +0; subnormal-only rows are not zero.
TEST(IntLinearCpu, SpecialValues) {
  Problem p;
  p.m = 4;
  p.n = 3;
  p.k = 300;
  p.has_bias = true;
  p.fill(5, false, false);
  p.x.set(0 * 300 + 7, NAN);          // row 0: NaN
  p.x.set(1 * 300 + 299, -INFINITY);  // row 1: -inf in the short last block
  for (int i = 0; i < 300; ++i)
    p.x.set(static_cast<size_t>(2 * 300 + i), bitsFloat(1u + static_cast<uint32_t>(i)));  // tiny
  Buffer y = p.run();
  for (int col = 0; col < 3; ++col) {
    EXPECT_EQ(y.bitsAt(static_cast<size_t>(col)), 0x7fc00000u);
    EXPECT_EQ(y.bitsAt(static_cast<size_t>(3 + col)), 0x7fc00000u);
    EXPECT_TRUE(std::isfinite(y.at(static_cast<size_t>(9 + col))));
  }
  checkSpecBits(p, y);

  Problem z;  // all-zero x: +0 (never -0), no bias
  z.m = 1;
  z.n = 2;
  z.k = 129;
  z.fill(6, false, false);
  for (int i = 0; i < 129; ++i)
    z.x.set(static_cast<size_t>(i), i % 2 ? -0.0f : 0.0f);
  Buffer yz = z.run();
  EXPECT_EQ(yz.bitsAt(0), 0u);
  EXPECT_EQ(yz.bitsAt(1), 0u);

  Problem s;  // subnormal x times a large w: a normal, exact result
  s.m = 1;
  s.n = 1;
  s.k = 1;
  s.w_dtype = DType::kF32;
  s.fill(7, false, false);
  s.x.set(0, bitsFloat(3u));  // 3 * 2^-149
  s.w.set(0, std::ldexp(1.0f, 100));
  Buffer ys = s.run();
  EXPECT_EQ(ys.at(0), std::ldexp(3.0f, -49));

  Problem o;  // overflow of the rounded dot: +inf, not NaN
  o.m = 1;
  o.n = 1;
  o.k = 2;
  o.w_dtype = DType::kF32;
  o.fill(8, false, false);
  o.x.set(0, 3e38f);
  o.x.set(1, 3e38f);
  o.w.set(0, 1.0f);
  o.w.set(1, 1.0f);
  Buffer yo = o.run();
  EXPECT_EQ(yo.bitsAt(0), 0x7f800000u);
}

// (b) A row's bits are the same alone and inside any batch, for any thread count, SIMD or not.
TEST(IntLinearCpu, RowsAreInvariantToBatchThreadsAndSimd) {
  Restore restore;
  Problem p;
  p.m = 67;
  p.n = 37;
  p.k = 1000;
  p.x_dtype = DType::kBF16;
  p.has_bias = true;
  p.fill(11, true, false);
  Buffer full = p.run();
  for (int threads : {1, 2, 3}) {
    for (bool simd : {true, false}) {
      setCpuThreads(threads);
      cpu::setIntLinearSimdEnabled(simd);
      EXPECT_EQ(test::firstBitDifference(p.run().bytes, full.bytes), -1)
          << threads << " threads simd " << simd;
    }
  }
  setCpuThreads(0);
  cpu::setIntLinearSimdEnabled(true);
  for (int64_t row : {int64_t{0}, int64_t{1}, int64_t{33}, int64_t{66}}) {
    Problem one = p;
    one.m = 1;
    one.x = Buffer(p.x_dtype, static_cast<size_t>(p.k));
    std::memcpy(one.x.bytes.data(), p.x.bytes.data() + row * p.k * 2, static_cast<size_t>(p.k) * 2);
    one.y_init = Buffer(p.y_dtype, static_cast<size_t>(p.n));
    Buffer y = one.run();
    EXPECT_EQ(std::memcmp(y.bytes.data(), full.bytes.data() + row * p.n * 4, p.n * 4), 0)
        << "row " << row;
  }
}

// ---- (c) accuracy on Llama-like data against fp64.

struct ErrorStats {
  double median = 0, max = 0, max_normwise = 0;
};

// Relative errors |y - exact| / |exact| (median, max) and the largest |y - exact| / sum |x w|.
ErrorStats errorsOf(const std::vector<float>& y, const std::vector<double>& exact,
                    const std::vector<double>& magnitude) {
  std::vector<double> rel;
  ErrorStats s;
  for (size_t i = 0; i < y.size(); ++i) {
    double err = std::fabs(static_cast<double>(y[i]) - exact[i]);
    if (exact[i] != 0.0) rel.push_back(err / std::fabs(exact[i]));
    s.max_normwise = std::max(s.max_normwise, err / magnitude[i]);
  }
  std::sort(rel.begin(), rel.end());
  s.median = rel[rel.size() / 2];
  s.max = rel.back();
  return s;
}

// x ~ N(0, 1) with 1% outlier channels x50 (the same channels in every row), w ~ N(0, 0.02).
TEST(IntLinearCpu, AccuracyAgainstFp64OnLlamaLikeData) {
  const int64_t m = 8, n = 96;
  std::printf(
      "| K | w | x outliers | repops-2 (3x2) median / max rel | repops-1 median / max rel | "
      "3x3 (Sw=20) median / max | 4x3 (Sx=27,Sw=20) median / max |\n");
  struct Case {
    int64_t k;
    DType w_dtype;
    float outlier;
  };
  const Case cases[] = {{4096, DType::kBF16, 50},  {4096, DType::kF32, 50},
                        {14336, DType::kBF16, 50}, {14336, DType::kF32, 50},
                        {4096, DType::kBF16, 1},   {4096, DType::kF32, 1}};
  for (const Case& test_case : cases) {
    {
      const int64_t k = test_case.k;
      const DType w_dtype = test_case.w_dtype;
      std::mt19937_64 rng(static_cast<uint64_t>(k) + static_cast<uint64_t>(w_dtype));
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<bool> outlier(static_cast<size_t>(k));
      for (auto&& o : outlier)
        o = rng() % 100 == 0;
      Buffer x(DType::kF32, static_cast<size_t>(m * k)), w(w_dtype, static_cast<size_t>(n * k));
      for (int64_t i = 0; i < m * k; ++i)
        x.set(static_cast<size_t>(i),
              normal(rng) * (outlier[static_cast<size_t>(i % k)] ? test_case.outlier : 1.0f));
      for (int64_t i = 0; i < n * k; ++i)
        w.set(static_cast<size_t>(i), normal(rng) * 0.02f);
      LinearArgs a;
      a.x = x.bytes.data();
      a.x_dtype = DType::kF32;
      a.w = w.bytes.data();
      a.w_dtype = w_dtype;
      a.m = m;
      a.n = n;
      a.k = k;
      std::vector<float> y2(static_cast<size_t>(m * n)), y1(y2.size()), y33(y2.size()),
          y43(y2.size());
      a.y = y2.data();
      ASSERT_EQ(cpu::intLinear(a), Status::kSuccess);
      a.y = y1.data();
      ASSERT_EQ(cpu::linear(a), Status::kSuccess);
      std::vector<double> exact(y2.size()), magnitude(y2.size());
      for (int64_t r = 0; r < m; ++r) {
        std::vector<double> xr = rowOf(x, r, k, k);
        for (int64_t c = 0; c < n; ++c) {
          std::vector<double> wr = rowOf(w, c, k, k);
          long double sum = 0, mag = 0;
          for (int64_t i = 0; i < k; ++i) {
            sum += static_cast<long double>(xr[i]) * wr[i];
            mag += std::fabs(static_cast<long double>(xr[i]) * wr[i]);
          }
          size_t at = static_cast<size_t>(r * n + c);
          exact[at] = static_cast<double>(sum);
          magnitude[at] = static_cast<double>(mag);
          y33[at] = specDot(xr, wr, 20, 20);
          y43[at] = specDot(xr, wr, 27, 20);
        }
      }
      ErrorStats r2 = errorsOf(y2, exact, magnitude), r1 = errorsOf(y1, exact, magnitude);
      ErrorStats r33 = errorsOf(y33, exact, magnitude), r43 = errorsOf(y43, exact, magnitude);
      std::printf("| %lld | %s | x%g | %.2e / %.2e | %.2e / %.2e | %.2e / %.2e | %.2e / %.2e |\n",
                  static_cast<long long>(k), dtypeName(w_dtype), test_case.outlier, r2.median,
                  r2.max, r1.median, r1.max, r33.median, r33.max, r43.median, r43.max);
      std::printf("|   | normwise max |y-exact|/sum|xw|: repops-2 %.2e, repops-1 %.2e |\n",
                  r2.max_normwise, r1.max_normwise);
      // Stated tolerances (docs/repops-spec/linear-int.md, Accuracy): the quantisation steps
      // are 2^-20 of x's and 2^-13 of w's block maximum.
      EXPECT_LE(r2.median, w_dtype == DType::kBF16 ? 1e-4 : 4e-4);
      EXPECT_LE(r2.max_normwise, 1e-4);
    }
  }
}

// (d) Spec-stability pin beside the bitwise check of (a): FNV-1a of fixed outputs.
TEST(IntLinearCpu, GoldenHashPin) {
  Problem p;
  p.m = 7;
  p.n = 33;
  p.k = 300;
  p.x_dtype = DType::kBF16;
  p.w_dtype = DType::kBF16;
  p.has_bias = true;
  p.bias_dtype = DType::kBF16;
  p.fill(2024, true, false);
  Buffer y = p.run();
  checkSpecBits(p, y);
  Problem q = p;
  q.x_dtype = DType::kF32;
  q.w_dtype = DType::kF16;
  q.y_dtype = DType::kBF16;
  q.has_bias = false;
  q.fill(2025, true, true);
  Buffer yq = q.run();
  checkSpecBits(q, yq);
  uint64_t hash =
      test::fnv1a(yq.bytes.data(), yq.bytes.size(), test::fnv1a(y.bytes.data(), y.bytes.size()));
  // Inputs come from std::mt19937_64 + std::normal_distribution (libstdc++); the pin assumes it.
  EXPECT_EQ(test::hex64(hash), "a0132ca229365db0") << "repops-2 linear golden hash changed";
}

TEST(IntLinearCpu, BadArgumentsAreRejected) {
  Problem p;
  p.fill(1, false, false);
  std::vector<float> y(4);
  LinearArgs a = p.args(y.data());
  a.k = 0;
  EXPECT_EQ(cpu::intLinear(a), Status::kInvalidArgument);
  a = p.args(y.data());
  a.x_dtype = DType::kF16;
  EXPECT_EQ(cpu::intLinear(a), Status::kInvalidArgument);
  a = p.args(y.data());
  a.y = const_cast<void*>(a.w);
  EXPECT_EQ(cpu::intLinear(a), Status::kInvalidArgument);
  a = p.args(y.data());
  a.m = 0;
  a.x = nullptr;
  EXPECT_EQ(cpu::intLinear(a), Status::kSuccess);
}

}  // namespace
}  // namespace ree::repops
