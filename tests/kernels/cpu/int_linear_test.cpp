// CPU repops-2 linear (docs/repops-spec/linear-int.md) against (a) an independent brute-force
// reference written from the spec text (frexp, ldexp, nearbyint, digits, __int128 sums) bitwise on
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

#include "kernels/int_linear_problem.h"
#include "kernels/linear_problem.h"
#include "ree/core/parallel.h"
#include "ree/kernels/int_linear.h"
#include "ree/kernels/linear.h"
#include "test_util.h"

namespace ree::repops {
namespace {

using Buffer = test::HostBuffer;

// The bias is drawn only when the call reads it (the seeds' data since this test was written).
struct Problem : test::IntLinearProblem<Buffer> {
  Problem() { draws.bias_always = false; }

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

// The spec's digits of an integer, most significant first: v = sum d[i] * 128^(count - 1 - i),
// with every digit but the first in [-64, 63] (Python's divmod would give the same).
std::vector<int64_t> specDigits(int64_t v, int count) {
  std::vector<int64_t> d(static_cast<size_t>(count));
  for (int i = count - 1; i > 0; --i) {
    int64_t low = v - 128 * static_cast<int64_t>(std::floor((v + 64) / 128.0));
    d[static_cast<size_t>(i)] = low;
    v = (v - low) / 128;
  }
  d[0] = v;
  return d;
}

// The digit layout of a definition: x with sx bits in x_digits digits, w likewise, and the pairs
// (i, j) with i + j <= kept summed (kept < 0: every pair, the untruncated product X * W).
struct Scheme {
  int sx, x_digits, sw, w_digits, kept;
};
constexpr Scheme kRepOps2{int_linear::kXShift, int_linear::kXSlices, int_linear::kWShift,
                          int_linear::kWSlices, int_linear::kKeptPairSum};

// The dot of the spec before bias: NaN if any input is NaN or infinite, else each block's kept
// digit-pair products summed exactly, the blocks summed in increasing order in binary64, then
// rounded to float.
float specDot(const std::vector<double>& x, const std::vector<double>& w, const Scheme& s) {
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(w[i])) return NAN;
  }
  const int top = (s.x_digits - 1) + (s.w_digits - 1);  // weight exponent (base 128) of d0 e0
  const int lowest = s.kept < 0 ? top : s.kept;         // the lowest kept weight: 128^(top-lowest)
  double acc = 0.0;
  for (size_t begin = 0; begin < x.size(); begin += 128) {
    size_t end = std::min(x.size(), begin + 128);
    std::vector<double> xb(x.begin() + begin, x.begin() + end);
    std::vector<double> wb(w.begin() + begin, w.begin() + end);
    int ex = specExponent(xb), ew = specExponent(wb);
    __int128 product = 0;  // in units of 128^(top - lowest)
    for (size_t i = 0; i < xb.size(); ++i) {
      // ldexp is exact (a power of two, no underflow in binary64); nearbyint rounds to nearest
      // even in the default rounding mode.
      auto xd = specDigits(static_cast<int64_t>(std::nearbyint(std::ldexp(xb[i], s.sx - ex))),
                           s.x_digits);
      auto wd = specDigits(static_cast<int64_t>(std::nearbyint(std::ldexp(wb[i], s.sw - ew))),
                           s.w_digits);
      for (int a = 0; a < s.x_digits; ++a) {
        for (int c = 0; c < s.w_digits; ++c) {
          if (a + c > lowest) continue;
          __int128 weight = 1;
          for (int t = 0; t < lowest - (a + c); ++t)
            weight *= 128;
          product += static_cast<__int128>(xd[static_cast<size_t>(a)]) *
                     wd[static_cast<size_t>(c)] * weight;
        }
      }
    }
    volatile double term = static_cast<double>(static_cast<int64_t>(product)) *
                           std::ldexp(1.0, ex + ew - s.sx - s.sw + 7 * (top - lowest));
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
  float dot = specDot(rowOf(p.x, row, p.xs(), p.k), rowOf(p.w, col, p.ws(), p.k), kRepOps2);
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
      test::drawOddShape(rng, p, rep == 0 ? 300 : 9, rep == 0 ? 6 : 20, 700,
                         /*hostile=*/rep != 2, /*non_finite=*/rep == 1);
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

// The largest digits: fp32 weights just below a power of two round up to |W| = 2^20 exactly
// (digits 64, 0, 0), and x's integers reach 2^27 - 8; both signs, every row of a block.
TEST(IntLinearCpu, ExtremeDigitsMatchSpec) {
  Problem p;
  p.m = 3;
  p.n = 5;
  p.k = 260;
  p.w_dtype = DType::kF32;
  p.fill(9, false, false);
  const float almost_one = 0.99999994f;  // 1 - 2^-24
  for (int i = 0; i < 260; ++i) {
    const float sign = (i % 3 == 0) ? -1.0f : 1.0f;
    p.w.set(static_cast<size_t>(i), sign * almost_one);
    p.w.set(static_cast<size_t>(260 + i), -almost_one);
    p.x.set(static_cast<size_t>(i), -sign * almost_one * 1024.0f);
    p.x.set(static_cast<size_t>(260 + i), almost_one);
  }
  Buffer y = p.run();
  checkSpecBits(p, y);
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
    Buffer y = test::rowAlone(p, row).run();
    EXPECT_EQ(std::memcmp(y.bytes.data(), full.bytes.data() + row * p.n * 4, p.n * 4), 0)
        << "row " << row;
  }
}

// ---- (c) accuracy on Llama-like data against fp64.

// x ~ N(0, 1) with 1% outlier channels x50 (the same channels in every row), w ~ N(0, 0.02).
TEST(IntLinearCpu, AccuracyAgainstFp64OnLlamaLikeData) {
  const int64_t m = 8, n = 96;
  std::printf(
      "| K | w | x outliers | repops-2 median / max rel | repops-1 median / max rel | "
      "all 12 pairs median / max | draft 3x2 (Sx=20,Sw=13) median / max |\n");
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
      const test::LlamaLikeOperands ops(m, n, k, w_dtype, test_case.outlier);
      std::vector<float> y2(static_cast<size_t>(m * n)), y1(y2.size()), y_all(y2.size()),
          y_draft(y2.size());
      ASSERT_EQ(cpu::intLinear(ops.args(y2.data())), Status::kSuccess);
      ASSERT_EQ(cpu::linear(ops.args(y1.data())), Status::kSuccess);
      std::vector<double> exact, magnitude;
      ops.reference(&exact, &magnitude);
      for (int64_t r = 0; r < m; ++r) {
        std::vector<double> xr = rowOf(ops.x, r, k, k);
        for (int64_t c = 0; c < n; ++c) {
          std::vector<double> wr = rowOf(ops.w, c, k, k);
          size_t at = static_cast<size_t>(r * n + c);
          y_all[at] = specDot(xr, wr, Scheme{27, 4, 20, 3, -1});
          y_draft[at] = specDot(xr, wr, Scheme{20, 3, 13, 2, -1});
        }
      }
      using test::errorsOf;
      test::ErrorStats r2 = errorsOf(y2, exact, magnitude), r1 = errorsOf(y1, exact, magnitude);
      test::ErrorStats r_all = errorsOf(y_all, exact, magnitude);
      test::ErrorStats r_draft = errorsOf(y_draft, exact, magnitude);
      std::printf("| %lld | %s | x%g | %.2e / %.2e | %.2e / %.2e | %.2e / %.2e | %.2e / %.2e |\n",
                  static_cast<long long>(k), dtypeName(w_dtype), test_case.outlier, r2.median,
                  r2.max, r1.median, r1.max, r_all.median, r_all.max, r_draft.median, r_draft.max);
      std::printf("|   | normwise max |y-exact|/sum|xw|: repops-2 %.2e, repops-1 %.2e |\n",
                  r2.max_normwise, r1.max_normwise);
      // Stated tolerances (docs/repops-spec/linear-int.md, Accuracy): with bf16 weights (exact
      // in 20 bits unless far below their block's maximum) at least as accurate as repops-1;
      // fp32 weights lose their low 4 bits: median within 2e-6, normwise within 1e-6.
      EXPECT_LE(r2.median, w_dtype == DType::kBF16 ? r1.median : 2e-6);
      EXPECT_LE(r2.max_normwise, 1e-6);
    }
  }
}

// (d) Spec-stability pin beside the bitwise check of (a): FNV-1a of fixed outputs.
TEST(IntLinearCpu, GoldenHashPin) {
  Problem p, q;
  test::goldenPinProblems(&p, &q);
  Buffer y = p.run();
  checkSpecBits(p, y);
  Buffer yq = q.run();
  checkSpecBits(q, yq);
  uint64_t hash =
      test::fnv1a(yq.bytes.data(), yq.bytes.size(), test::fnv1a(y.bytes.data(), y.bytes.size()));
  // Inputs come from std::mt19937_64 + std::normal_distribution (libstdc++); the pin assumes it.
  EXPECT_EQ(test::hex64(hash), "e4168f2dcd70aeb0") << "repops-2 linear golden hash changed";
}

// Weights prepared once (model parameters) give the bits of quantising them on every call.
TEST(IntLinearCpu, PreparedWeightsGiveTheSameBits) {
  std::mt19937_64 rng(31);
  int cases = 0;
  test::forEachLinearDtypes([&](DType x_dtype, DType w_dtype, DType y_dtype) {
    Problem p;
    p.setDtypes(x_dtype, w_dtype, y_dtype);
    test::drawOddShape(rng, p, 150, 20, 700, /*hostile=*/true, /*non_finite=*/cases % 3 == 1);
    Buffer direct = p.run();
    Buffer y = p.y_init;
    std::unique_ptr<cpu::IntLinearWeights> prepared;
    EXPECT_EQ(cpu::prepareIntLinearWeights(p.args(y.bytes.data()), &prepared), Status::kSuccess)
        << lastErrorMessage();
    EXPECT_EQ(cpu::intLinear(p.args(y.bytes.data()), prepared.get()), Status::kSuccess)
        << lastErrorMessage();
    EXPECT_EQ(test::firstBitDifference(y.bytes, direct.bytes), -1) << p.describe();
    checkSpecBits(p, y);
    ++cases;
    return !HasFatalFailure();
  });
  EXPECT_EQ(cases, 12);
  // Prepared weights of another shape are refused.
  Problem p;
  p.m = 2;
  p.n = 5;
  p.k = 130;
  p.fill(3, false, false);
  Buffer y = p.y_init;
  std::unique_ptr<cpu::IntLinearWeights> prepared;
  ASSERT_EQ(cpu::prepareIntLinearWeights(p.args(y.bytes.data()), &prepared), Status::kSuccess);
  LinearArgs other = p.args(y.bytes.data());
  other.n -= 1;
  EXPECT_EQ(cpu::intLinear(other, prepared.get()), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("prepared weights of [5, 130] for a [4, 130] w"),
            std::string::npos)
      << lastErrorMessage();
}

TEST(IntLinearCpu, BadArgumentsAreRejected) {
  test::expectBadArgumentsRejected<Problem>([](const LinearArgs& a) { return cpu::intLinear(a); });
  Problem p;  // y over w
  p.fill(1, false, false);
  std::vector<float> y(4);
  LinearArgs a = p.args(y.data());
  a.y = const_cast<void*>(a.w);
  EXPECT_EQ(cpu::intLinear(a), Status::kInvalidArgument);
}

}  // namespace
}  // namespace ree::repops
