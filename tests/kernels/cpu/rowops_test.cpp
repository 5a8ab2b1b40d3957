// Row-wise RepOps on the CPU (rowops.h): accuracy against naive fp64 references, special values,
// the canonical reduction order (re-derived here independently of reduce.h), bitwise invariance
// to batching and thread count, golden hashes and argument errors.
#include "ree/kernels/rowops.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include "ree/core/parallel.h"
#include "test_util.h"

namespace ree::repops {
namespace {

using test::fnv1a;
using test::hashOf;
using test::randomValues;

template <typename T>
constexpr DType dtypeOf() {
  return std::is_same<T, float>::value
             ? DType::kF32
             : (std::is_same<T, bf16_t>::value ? DType::kBF16 : DType::kF16);
}

template <typename T>
RowsIn in(const std::vector<T>& v, int64_t stride) {
  return RowsIn{v.data(), dtypeOf<T>(), stride};
}
template <typename T>
RowsOut out(std::vector<T>& v, int64_t stride) {
  return RowsOut{v.data(), dtypeOf<T>(), stride};
}
template <typename T>
VecIn vec(const std::vector<T>& v) {
  return VecIn{v.data(), dtypeOf<T>()};
}

template <typename T>
std::vector<double> toDouble(const std::vector<T>& v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    d[i] = loadFloat(v[i]);
  return d;
}

// Unit roundoff of a storage type's significand.
template <typename T>
double unitRoundoff() {
  return std::is_same<T, float>::value ? 0x1p-24
                                       : (std::is_same<T, bf16_t>::value ? 0x1p-8 : 0x1p-11);
}

// Half the spacing of a storage type's subnormals: the absolute rounding error near zero.
template <typename T>
double subnormalHalfSpacing() {
  return std::is_same<T, float>::value ? 0x1p-150
                                       : (std::is_same<T, bf16_t>::value ? 0x1p-134 : 0x1p-25);
}

// The canonical sum order written out from the spec text (not from reduce.h): chunks of 128
// chained from +0, chunk partials merged left to right starting from the first partial.
float specSum(const std::vector<float>& x) {
  float total = 0.0f;
  for (size_t begin = 0; begin < x.size(); begin += 128) {
    float partial = 0.0f;
    for (size_t k = begin; k < std::min(x.size(), begin + 128); ++k)
      partial += x[k];
    total = begin == 0 ? partial : total + partial;
  }
  return total;
}

float specDotSelf(const std::vector<float>& x) {
  float total = 0.0f;
  for (size_t begin = 0; begin < x.size(); begin += 128) {
    float partial = 0.0f;
    for (size_t k = begin; k < std::min(x.size(), begin + 128); ++k) {
      partial = std::fmaf(x[k], x[k], partial);
    }
    total = begin == 0 ? partial : total + partial;
  }
  return total;
}

const int kLengths[] = {1, 2, 127, 128, 129, 255, 256, 1000, 4096, 4097};

// ---- reductions ------------------------------------------------------------------------------

TEST(RowOpsCpu, SumAndVarFollowTheCanonicalOrderBitwise) {
  for (int n : kLengths) {
    std::vector<float> x = randomValues<float>(n, 100 + n, 3.0f);
    float sum = 0, var = 0;
    ASSERT_EQ(cpu::reduceRows(ReduceOp::kSum, in(x, n), &sum, DType::kF32, 1, n), Status::kSuccess);
    ASSERT_EQ(cpu::reduceRows(ReduceOp::kVar, in(x, n), &var, DType::kF32, 1, n), Status::kSuccess);
    EXPECT_EQ(floatBits(sum), floatBits(specSum(x))) << "n=" << n;
    float mean = specSum(x) / static_cast<float>(n);
    std::vector<float> dev(n);
    for (int k = 0; k < n; ++k)
      dev[k] = x[k] - mean;
    EXPECT_EQ(floatBits(var), floatBits(specDotSelf(dev) / static_cast<float>(n))) << "n=" << n;
  }
}

template <typename T>
void checkReductionsAgainstFp64() {
  for (int n : kLengths) {
    const int rows = 3;
    std::vector<T> x = randomValues<T>(static_cast<size_t>(rows) * n, 7 * n + 1, 2.0f);
    std::vector<double> xd = toDouble(x);
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kVar}) {
      std::vector<float> got(rows);
      ASSERT_EQ(cpu::reduceRows(op, in(x, n), got.data(), DType::kF32, rows, n), Status::kSuccess);
      for (int i = 0; i < rows; ++i) {
        double sum = 0, abs_sum = 0, mx = -INFINITY, mn = INFINITY;
        for (int k = 0; k < n; ++k) {
          double v = xd[i * n + k];
          sum += v;
          abs_sum += std::fabs(v);
          mx = std::max(mx, v);
          mn = std::min(mn, v);
        }
        double mean = sum / n, sq = 0, sq_abs = 0;
        for (int k = 0; k < n; ++k) {
          double d = xd[i * n + k] - mean;
          sq += d * d;
          sq_abs += d * d;
        }
        // Chained summation error: at most (chain length + merges) * u * sum|terms|; 128 + n/128
        // terms in any chain, plus the rounding of the mean itself (propagated into var).
        const double depth = 128.0 + n / 128.0 + 2.0;
        const double u = 0x1p-24;
        switch (op) {
          case ReduceOp::kSum:
            EXPECT_NEAR(got[i], sum, depth * u * abs_sum + 1e-30);
            break;
          case ReduceOp::kMean:
            EXPECT_NEAR(got[i], mean, depth * u * abs_sum / n + 1e-30);
            break;
          case ReduceOp::kMax:
            EXPECT_EQ(got[i], mx);
            break;
          case ReduceOp::kMin:
            EXPECT_EQ(got[i], mn);
            break;
          case ReduceOp::kVar: {
            double mean_err = depth * u * abs_sum / n;
            double bound = (depth + 2) * u * sq_abs / n + 2 * mean_err * mean_err +
                           4 * mean_err * std::sqrt(sq_abs / n) + 1e-30;
            EXPECT_NEAR(got[i], sq / n, bound);
            break;
          }
        }
      }
    }
  }
}

TEST(RowOpsCpu, ReductionsMatchFp64F32) {
  checkReductionsAgainstFp64<float>();
}
TEST(RowOpsCpu, ReductionsMatchFp64BF16) {
  checkReductionsAgainstFp64<bf16_t>();
}
TEST(RowOpsCpu, ReductionsMatchFp64F16) {
  checkReductionsAgainstFp64<f16_t>();
}

// The spec's MAX/MIN written out (not from rowops.h): any NaN gives the canonical +qNaN; numbers
// are ordered -inf < ... < -0 < +0 < ... < +inf and the last (first) of the row wins.
bool specBefore(float a, float b) {
  if (a == b) return std::signbit(a) && !std::signbit(b);
  return a < b;
}

float specSelect(const std::vector<float>& x, bool is_max) {
  for (float v : x) {
    if (std::isnan(v)) return bitsFloat(0x7fc00000u);
  }
  float best = x[0];
  for (float v : x) {
    if (is_max ? specBefore(best, v) : specBefore(v, best)) best = v;
  }
  return best;
}

// Max and min select a row's extreme in any grouping (the CPU scans lanes of keys, the GPU a tree
// of warps): every length around the lane and vector widths, every dtype, rows salted with both
// zeros, both infinities, subnormals, the largest finite values and NaNs of both signs.
template <typename T>
void checkMaxMinAgainstSpec() {
  const float specials[] = {0.0f,       -0.0f,         INFINITY,       -INFINITY, 0x1p-149f,
                            -0x1p-149f, 3.4028235e38f, -3.4028235e38f, 1.0f,      -1.0f};
  for (int n = 1; n <= 70; ++n) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<T> row = randomValues<T>(static_cast<size_t>(n), 1000u * n + trial);
      const int salt = trial % 4;  // 0: plain; 1: specials; 2: specials and NaNs; 3: zeros only
      std::mt19937 rng(static_cast<unsigned>(n * 100 + trial));
      for (int k = 0; k < n; ++k) {
        const int r = static_cast<int>(rng() % 1000003u);
        if (salt >= 1 && r % 5 == 0) row[k] = storeAs<T>(specials[(r / 5) % 10]);
        if (salt == 2 && r % 11 == 0)
          row[k] = storeAs<T>(bitsFloat(r % 2 ? 0xffc00001u : 0x7fa00000u));
        if (salt == 3) row[k] = storeAs<T>(k % 2 ? -0.0f : 0.0f);
      }
      std::vector<float> widened(row.size());
      for (size_t k = 0; k < row.size(); ++k)
        widened[k] = loadFloat(row[k]);
      for (bool is_max : {true, false}) {
        float got = 0.0f;
        ASSERT_EQ(cpu::reduceRows(is_max ? ReduceOp::kMax : ReduceOp::kMin, in(row, n), &got,
                                  DType::kF32, 1, n),
                  Status::kSuccess);
        EXPECT_EQ(floatBits(got), floatBits(specSelect(widened, is_max)))
            << (is_max ? "max" : "min") << " n=" << n << " trial=" << trial;
      }
    }
  }
}

TEST(RowOpsCpu, MaxMinEqualTheSpecSelectionOnSaltedRows) {
  checkMaxMinAgainstSpec<float>();
  checkMaxMinAgainstSpec<bf16_t>();
  checkMaxMinAgainstSpec<f16_t>();
}

TEST(RowOpsCpu, MaxMinNaNAndSignedZero) {
  const float nan_neg = bitsFloat(0xffc00001u);
  std::vector<float> x = {1.0f, nan_neg, 3.0f, -INFINITY};
  float got = 0;
  ASSERT_EQ(cpu::reduceRows(ReduceOp::kMax, in(x, 4), &got, DType::kF32, 1, 4), Status::kSuccess);
  EXPECT_EQ(floatBits(got), 0x7fc00000u);  // canonical +qNaN whatever NaN was seen
  ASSERT_EQ(cpu::reduceRows(ReduceOp::kMin, in(x, 4), &got, DType::kF32, 1, 4), Status::kSuccess);
  EXPECT_EQ(floatBits(got), 0x7fc00000u);
  for (auto row : {std::vector<float>{-0.0f, 0.0f}, std::vector<float>{0.0f, -0.0f}}) {
    ASSERT_EQ(cpu::reduceRows(ReduceOp::kMax, in(row, 2), &got, DType::kF32, 1, 2),
              Status::kSuccess);
    EXPECT_EQ(floatBits(got), 0x00000000u);
    ASSERT_EQ(cpu::reduceRows(ReduceOp::kMin, in(row, 2), &got, DType::kF32, 1, 2),
              Status::kSuccess);
    EXPECT_EQ(floatBits(got), 0x80000000u);
  }
  std::vector<float> infs = {-INFINITY, INFINITY, 5.0f};
  ASSERT_EQ(cpu::reduceRows(ReduceOp::kSum, in(infs, 3), &got, DType::kF32, 1, 3),
            Status::kSuccess);
  EXPECT_TRUE(std::isnan(got));
  ASSERT_EQ(cpu::reduceRows(ReduceOp::kMax, in(infs, 3), &got, DType::kF32, 1, 3),
            Status::kSuccess);
  EXPECT_EQ(got, INFINITY);
  // Overflow of a sum is inf, not saturation; the output is rounded to bf16 once.
  std::vector<float> big(300, 3e38f);
  ASSERT_EQ(cpu::reduceRows(ReduceOp::kSum, in(big, 300), &got, DType::kF32, 1, 300),
            Status::kSuccess);
  EXPECT_EQ(got, INFINITY);
  bf16_t got_bf16{};
  std::vector<float> third = {1.0f / 3.0f};
  ASSERT_EQ(cpu::reduceRows(ReduceOp::kSum, in(third, 1), &got_bf16, DType::kBF16, 1, 1),
            Status::kSuccess);
  EXPECT_EQ(got_bf16.bits, toBF16(1.0f / 3.0f).bits);
  // Population variance of an all-equal row is exactly +0.
  std::vector<float> same(4097, 1.5f);  // the sum and the mean are exact
  ASSERT_EQ(cpu::reduceRows(ReduceOp::kVar, in(same, 4097), &got, DType::kF32, 1, 4097),
            Status::kSuccess);
  EXPECT_EQ(floatBits(got), 0u);
}

TEST(RowOpsCpu, ArgmaxTiesAndNaN) {
  auto argmax = [](std::vector<float> row) {
    int32_t index = -7;
    EXPECT_EQ(cpu::argmaxRows(in(row, row.size()), &index, 1, row.size()), Status::kSuccess);
    return index;
  };
  EXPECT_EQ(argmax({1, 3, 3, 2}), 1);
  EXPECT_EQ(argmax({-0.0f, 0.0f}), 0);  // IEEE equal: lowest index
  EXPECT_EQ(argmax({0.0f, -0.0f}), 0);
  EXPECT_EQ(argmax({1, NAN, 5, NAN}), 1);
  EXPECT_EQ(argmax({INFINITY, 1, NAN}), 2);
  EXPECT_EQ(argmax({-INFINITY, -INFINITY}), 0);
  EXPECT_EQ(argmax({7}), 0);
  // Random rows against a naive scan; ties are frequent in bf16.
  for (int n : kLengths) {
    std::vector<bf16_t> x = randomValues<bf16_t>(n * 2, n, 0.01f);
    std::vector<int32_t> got(2);
    ASSERT_EQ(cpu::argmaxRows(in(x, n), got.data(), 2, n), Status::kSuccess);
    for (int i = 0; i < 2; ++i) {
      int best = 0;
      for (int k = 1; k < n; ++k) {
        if (toFloat(x[i * n + k]) > toFloat(x[i * n + best])) best = k;
      }
      EXPECT_EQ(got[i], best) << "n=" << n;
    }
  }
}

// ---- casts -----------------------------------------------------------------------------------

TEST(RowOpsCpu, CastsMatchCompilerAndExactReferences) {
  const int rows = 5, cols = 129, stride = 131;
  std::vector<float> x = randomValues<float>(rows * stride, 5, 1000.0f);
  x[0] = NAN;
  x[1] = -INFINITY;
  x[2] = -0.0f;
  x[3] = 1e-7f;      // subnormal in f16
  x[4] = 70000.f;    // overflows f16
  x[5] = 0x1.01p0f;  // bf16 tie, even neighbour below: rounds down to 0x3f80
  x[6] = 0x1.03p0f;  // bf16 tie, odd neighbour below: rounds up to 0x3f82
  std::vector<f16_t> h(rows * cols);
  ASSERT_EQ(cpu::cast(in(x, stride), out(h, cols), rows, cols), Status::kSuccess);
  std::vector<bf16_t> b(rows * cols);
  ASSERT_EQ(cpu::cast(in(x, stride), out(b, cols), rows, cols), Status::kSuccess);
  for (int i = 0; i < rows; ++i) {
    for (int k = 0; k < cols; ++k) {
      float v = x[i * stride + k];
      _Float16 ref = static_cast<_Float16>(v);
      uint16_t ref_bits;
      std::memcpy(&ref_bits, &ref, 2);
      if (std::isnan(v)) {
        EXPECT_EQ(h[i * cols + k].bits & 0x7fffu, 0x7e00u);
        EXPECT_EQ(b[i * cols + k].bits & 0x7fffu, 0x7fc0u);
        continue;
      }
      EXPECT_EQ(h[i * cols + k].bits, ref_bits) << v;
      // bf16: the nearer neighbour, computed in double.
      double lo = bitsFloat(floatBits(v) & 0xffff0000u);
      double hi = bitsFloat((floatBits(v) & 0xffff0000u) + 0x10000u);
      double got = toFloat(b[i * cols + k]);
      double err = std::fabs(got - v), other = std::fabs((got == lo ? hi : lo) - v);
      if (std::isfinite(v)) {
        EXPECT_LE(err, other) << v;
      }
    }
  }
  EXPECT_EQ(b[5].bits, 0x3f80u);
  EXPECT_EQ(b[6].bits, 0x3f82u);
  // bf16 -> f16 -> f32 chain and f16 -> bf16: one rounding from the exact widened value.
  std::vector<float> back(rows * cols);
  ASSERT_EQ(cpu::cast(in(h, cols), out(back, cols), rows, cols), Status::kSuccess);
  for (int k = 0; k < rows * cols; ++k) {
    _Float16 ref;
    std::memcpy(&ref, &h[k].bits, 2);
    if (!std::isnan(back[k])) {
      EXPECT_EQ(back[k], static_cast<float>(ref));
    }
  }
  std::vector<f16_t> from_bf16(rows * cols);
  ASSERT_EQ(cpu::cast(in(b, cols), out(from_bf16, cols), rows, cols), Status::kSuccess);
  for (int k = 0; k < rows * cols; ++k) {
    EXPECT_EQ(from_bf16[k].bits, toF16(toFloat(b[k])).bits);
  }
}

// ---- norms and softmax -------------------------------------------------------------------------

template <typename InT, typename OutT>
void checkRmsNormAgainstFp64(RmsNormVariant variant) {
  for (int n : kLengths) {
    const int rows = 3;
    const float eps = 1e-6f;
    std::vector<InT> x = randomValues<InT>(rows * n, 3 * n, 1.5f);
    std::vector<bf16_t> w = randomValues<bf16_t>(n, 11 * n, 1.0f);
    std::vector<OutT> y(rows * n);
    ASSERT_EQ(cpu::rmsNorm(in(x, n), vec(w), out(y, n), rows, n, eps, variant), Status::kSuccess);
    for (int i = 0; i < rows; ++i) {
      double ss = 0;
      for (int k = 0; k < n; ++k)
        ss += static_cast<double>(loadFloat(x[i * n + k])) * loadFloat(x[i * n + k]);
      double r = 1.0 / std::sqrt(ss / n + eps);
      for (int k = 0; k < n; ++k) {
        double ref = loadFloat(x[i * n + k]) * r * toFloat(w[k]);
        double got = loadFloat(y[i * n + k]);
        // fp32 statistics are good to ~(n/128 + 130) u; then the output rounding, plus one
        // rounding to the input type in the cast-before-weight variant.
        double tol = (200 * 0x1p-24 + unitRoundoff<OutT>() +
                      (variant == RmsNormVariant::kCastBeforeWeight ? unitRoundoff<InT>() : 0.0)) *
                         std::fabs(ref) * 1.01 +
                     subnormalHalfSpacing<OutT>() +
                     (variant == RmsNormVariant::kCastBeforeWeight
                          ? subnormalHalfSpacing<InT>() * std::fabs(toFloat(w[k]))
                          : 0.0);
        ASSERT_NEAR(got, ref, tol) << "n=" << n << " k=" << k;
      }
    }
  }
}

TEST(RowOpsCpu, RmsNormMatchesFp64) {
  checkRmsNormAgainstFp64<float, float>(RmsNormVariant::kF32);
  checkRmsNormAgainstFp64<bf16_t, bf16_t>(RmsNormVariant::kF32);
  checkRmsNormAgainstFp64<bf16_t, float>(RmsNormVariant::kF32);
  checkRmsNormAgainstFp64<f16_t, f16_t>(RmsNormVariant::kF32);
  checkRmsNormAgainstFp64<bf16_t, bf16_t>(RmsNormVariant::kCastBeforeWeight);
  checkRmsNormAgainstFp64<f16_t, float>(RmsNormVariant::kCastBeforeWeight);
}

TEST(RowOpsCpu, RmsNormCastBeforeWeightIsTheHuggingFaceSequence) {
  // HF LlamaRMSNorm: h = (x.float() * rsqrt(mean(x^2) + eps)).to(bf16); y = (w * h) in bf16.
  const int n = 300;
  std::vector<bf16_t> x = randomValues<bf16_t>(n, 1), w = randomValues<bf16_t>(n, 2);
  std::vector<bf16_t> y(n);
  ASSERT_EQ(
      cpu::rmsNorm(in(x, n), vec(w), out(y, n), 1, n, 1e-5f, RmsNormVariant::kCastBeforeWeight),
      Status::kSuccess);
  std::vector<float> xf(n);
  for (int k = 0; k < n; ++k)
    xf[k] = toFloat(x[k]);
  float r = crRsqrt(specDotSelf(xf) / n + 1e-5f);
  for (int k = 0; k < n; ++k) {
    bf16_t h = toBF16(xf[k] * r);
    EXPECT_EQ(y[k].bits, toBF16(toFloat(w[k]) * toFloat(h)).bits) << k;
  }
}

template <typename InT, typename OutT>
void checkLayerNormAgainstFp64(bool with_weight, bool with_bias) {
  for (int n : kLengths) {
    if (n == 1) continue;  // variance 0: covered by the special-value test
    const int rows = 2;
    const float eps = 1e-5f;
    std::vector<InT> x = randomValues<InT>(rows * n, 5 * n, 2.0f);
    for (auto& v : x)
      v = storeAs<InT>(loadFloat(v) + 3.0f);  // non-zero mean
    std::vector<float> w = randomValues<float>(n, 13 * n), b = randomValues<float>(n, 17 * n);
    std::vector<OutT> y(rows * n);
    ASSERT_EQ(cpu::layerNorm(in(x, n), with_weight ? vec(w) : VecIn{}, with_bias ? vec(b) : VecIn{},
                             out(y, n), rows, n, eps),
              Status::kSuccess);
    for (int i = 0; i < rows; ++i) {
      double mean = 0, var = 0;
      for (int k = 0; k < n; ++k)
        mean += loadFloat(x[i * n + k]);
      mean /= n;
      for (int k = 0; k < n; ++k)
        var += std::pow(loadFloat(x[i * n + k]) - mean, 2);
      var /= n;
      double r = 1.0 / std::sqrt(var + eps);
      for (int k = 0; k < n; ++k) {
        double norm = (loadFloat(x[i * n + k]) - mean) * r;
        double ref = norm * (with_weight ? w[k] : 1.0) + (with_bias ? b[k] : 0.0);
        double scale = std::fabs(norm * (with_weight ? w[k] : 1.0)) + std::fabs(ref);
        double tol = 400 * 0x1p-24 * (scale + 4 * std::fabs(with_weight ? w[k] : 1.0)) +
                     unitRoundoff<OutT>() * std::fabs(ref) * 1.01 + 1e-30;
        ASSERT_NEAR(loadFloat(y[i * n + k]), ref, tol) << "n=" << n << " k=" << k;
      }
    }
  }
}

TEST(RowOpsCpu, LayerNormMatchesFp64) {
  checkLayerNormAgainstFp64<float, float>(true, true);
  checkLayerNormAgainstFp64<float, float>(true, false);
  checkLayerNormAgainstFp64<float, float>(false, false);
  checkLayerNormAgainstFp64<bf16_t, bf16_t>(true, true);
  checkLayerNormAgainstFp64<f16_t, float>(true, false);
}

template <typename InT, typename OutT>
void checkSoftmaxAgainstFp64(bool log_output) {
  for (int n : kLengths) {
    const int rows = 2;
    std::vector<InT> x = randomValues<InT>(rows * n, 19 * n, 4.0f);
    std::vector<OutT> y(rows * n);
    auto fn = log_output ? cpu::logSoftmax : cpu::softmax;
    ASSERT_EQ(fn(in(x, n), out(y, n), rows, n), Status::kSuccess);
    for (int i = 0; i < rows; ++i) {
      double m = -INFINITY, s = 0;
      for (int k = 0; k < n; ++k)
        m = std::max<double>(m, loadFloat(x[i * n + k]));
      for (int k = 0; k < n; ++k)
        s += std::exp(loadFloat(x[i * n + k]) - m);
      for (int k = 0; k < n; ++k) {
        double d = loadFloat(x[i * n + k]) - m;
        double ref = log_output ? d - std::log(s) : std::exp(d) / s;
        double got = loadFloat(y[i * n + k]);
        if (log_output) {
          // (x - m) is exact or rounded once; log(s) carries s's relative error ~ (n/128+130) u.
          double tol = 300 * 0x1p-24 * (std::fabs(d) + std::fabs(std::log(s)) + 1) +
                       unitRoundoff<OutT>() * std::fabs(ref) * 1.01;
          ASSERT_NEAR(got, ref, tol) << "n=" << n << " k=" << k;
        } else {
          double tol = (300 * 0x1p-24 * (1 + std::fabs(d)) + unitRoundoff<OutT>()) * ref * 1.01 +
                       subnormalHalfSpacing<OutT>();
          ASSERT_NEAR(got, ref, tol) << "n=" << n << " k=" << k;
        }
      }
    }
  }
}

TEST(RowOpsCpu, SoftmaxMatchesFp64) {
  checkSoftmaxAgainstFp64<float, float>(false);
  checkSoftmaxAgainstFp64<bf16_t, bf16_t>(false);
  checkSoftmaxAgainstFp64<bf16_t, float>(false);
  checkSoftmaxAgainstFp64<f16_t, f16_t>(false);
}

TEST(RowOpsCpu, LogSoftmaxMatchesFp64) {
  checkSoftmaxAgainstFp64<float, float>(true);
  checkSoftmaxAgainstFp64<bf16_t, bf16_t>(true);
  checkSoftmaxAgainstFp64<bf16_t, float>(true);
}

TEST(RowOpsCpu, NormAndSoftmaxSpecialValues) {
  float y1 = -1;
  // Row length 1.
  std::vector<float> one = {-3.0f};
  std::vector<float> y(8);
  ASSERT_EQ(cpu::softmax(in(one, 1), out(y, 1), 1, 1), Status::kSuccess);
  EXPECT_EQ(y[0], 1.0f);
  ASSERT_EQ(cpu::logSoftmax(in(one, 1), out(y, 1), 1, 1), Status::kSuccess);
  EXPECT_EQ(floatBits(y[0]), 0u);
  ASSERT_EQ(cpu::layerNorm(in(one, 1), VecIn{}, VecIn{}, RowsOut{&y1, DType::kF32, 1}, 1, 1, 1e-5f),
            Status::kSuccess);
  EXPECT_EQ(floatBits(y1), 0u);  // (x - mean) = +0
  // All-equal rows: softmax is exactly 1/n for n a power of two.
  std::vector<float> same(256, 42.0f), ys(256);
  ASSERT_EQ(cpu::softmax(in(same, 256), out(ys, 256), 1, 256), Status::kSuccess);
  for (float v : ys)
    EXPECT_EQ(v, 1.0f / 256);
  // -inf entries get exactly 0 (softmax) and -inf (log-softmax); a NaN poisons its row only.
  std::vector<float> rows2 = {1.0f, -INFINITY, 2.0f, NAN, 0.0f, 0.0f};
  std::vector<float> out2(6);
  ASSERT_EQ(cpu::softmax(in(rows2, 3), out(out2, 3), 2, 3), Status::kSuccess);
  EXPECT_EQ(floatBits(out2[1]), 0u);
  EXPECT_TRUE(std::isnan(out2[3]) && std::isnan(out2[4]) && std::isnan(out2[5]));
  // Output NaNs are the canonical +qNaN whatever NaN the arithmetic made (x86: -qNaN for inf-inf).
  for (int k = 3; k < 6; ++k)
    EXPECT_EQ(floatBits(out2[k]), 0x7fc00000u);
  std::vector<float> with_inf = {INFINITY, 1.0f}, out_inf(2);
  ASSERT_EQ(cpu::softmax(in(with_inf, 2), out(out_inf, 2), 1, 2), Status::kSuccess);
  EXPECT_EQ(floatBits(out_inf[0]), 0x7fc00000u);
  EXPECT_EQ(floatBits(out_inf[1]), 0x7fc00000u);
  float single_nan = bitsFloat(0xffc01234u), max_out = 0;
  ASSERT_EQ(cpu::reduceRows(ReduceOp::kMax, RowsIn{&single_nan, DType::kF32, 1}, &max_out,
                            DType::kF32, 1, 1),
            Status::kSuccess);
  EXPECT_EQ(floatBits(max_out), 0x7fc00000u);
  ASSERT_EQ(cpu::logSoftmax(in(rows2, 3), out(out2, 3), 2, 3), Status::kSuccess);
  EXPECT_EQ(out2[1], -INFINITY);
  // Huge logits do not overflow (max subtracted first); tiny RMSNorm inputs do not underflow to 0
  // while eps is 0.
  std::vector<float> huge = {3e38f, 3e38f, -3e38f, 0.0f};
  ASSERT_EQ(cpu::softmax(in(huge, 4), out(y, 4), 1, 4), Status::kSuccess);
  EXPECT_EQ(y[0], 0.5f);
  EXPECT_EQ(y[1], 0.5f);
  EXPECT_EQ(floatBits(y[2]), 0u);
  std::vector<float> tiny = {2e-19f, -2e-19f};  // squares stay normal
  ASSERT_EQ(cpu::rmsNorm(in(tiny, 2), VecIn{}, out(y, 2), 1, 2, 0.0f, RmsNormVariant::kF32),
            Status::kSuccess);
  EXPECT_NEAR(y[0], 1.0f, 1e-6);
  EXPECT_NEAR(y[1], -1.0f, 1e-6);
  // Negative zero input keeps its sign through RMSNorm.
  std::vector<float> zeros = {-0.0f, 1.0f};
  ASSERT_EQ(cpu::rmsNorm(in(zeros, 2), VecIn{}, out(y, 2), 1, 2, 1e-6f, RmsNormVariant::kF32),
            Status::kSuccess);
  EXPECT_EQ(floatBits(y[0]), 0x80000000u);
  // An all-equal row under LayerNorm gives the bias exactly.
  std::vector<float> w = {2, 2, 2}, b = {0.5f, -1, 3}, x3 = {7, 7, 7}, y3(3);
  ASSERT_EQ(cpu::layerNorm(in(x3, 3), vec(w), vec(b), out(y3, 3), 1, 3, 1e-5f), Status::kSuccess);
  EXPECT_EQ(y3, b);
}

// ---- invariance and golden pins ------------------------------------------------------------

// Runs every operator on `rows` rows (strided) and returns each output row's bytes hashed.
struct AllOps {
  std::vector<uint64_t> row_hashes;
};

AllOps runAll(const std::vector<bf16_t>& x, int64_t rows, int64_t cols, int64_t stride,
              const std::vector<bf16_t>& w, const std::vector<float>& b) {
  AllOps result;
  std::vector<bf16_t> y(rows * stride);
  std::vector<float> yf(rows * cols), red(rows);
  std::vector<int32_t> idx(rows);
  std::vector<uint64_t> hashes(rows, 1469598103934665603ull);
  auto mix_rows = [&](const void* data, int64_t row_bytes, int64_t stride_bytes) {
    for (int64_t i = 0; i < rows; ++i) {
      hashes[i] = fnv1a(static_cast<const char*>(data) + i * stride_bytes, row_bytes, hashes[i]);
    }
  };
  EXPECT_EQ(cpu::reduceRows(ReduceOp::kSum, in(x, stride), red.data(), DType::kF32, rows, cols),
            Status::kSuccess);
  mix_rows(red.data(), 4, 4);
  EXPECT_EQ(cpu::reduceRows(ReduceOp::kVar, in(x, stride), red.data(), DType::kF32, rows, cols),
            Status::kSuccess);
  mix_rows(red.data(), 4, 4);
  EXPECT_EQ(cpu::reduceRows(ReduceOp::kMax, in(x, stride), red.data(), DType::kF32, rows, cols),
            Status::kSuccess);
  mix_rows(red.data(), 4, 4);
  EXPECT_EQ(cpu::argmaxRows(in(x, stride), idx.data(), rows, cols), Status::kSuccess);
  mix_rows(idx.data(), 4, 4);
  EXPECT_EQ(cpu::cast(in(x, stride), out(yf, cols), rows, cols), Status::kSuccess);
  mix_rows(yf.data(), cols * 4, cols * 4);
  {
    EXPECT_EQ(cpu::rmsNorm(in(x, stride), vec(w), out(y, stride), rows, cols, 1e-6f,
                           RmsNormVariant::kCastBeforeWeight),
              Status::kSuccess);
    mix_rows(y.data(), cols * 2, stride * 2);
    EXPECT_EQ(
        cpu::rmsNorm(in(x, stride), vec(w), out(yf, cols), rows, cols, 1e-6f, RmsNormVariant::kF32),
        Status::kSuccess);
    mix_rows(yf.data(), cols * 4, cols * 4);
    EXPECT_EQ(cpu::layerNorm(in(x, stride), vec(w), vec(b), out(y, stride), rows, cols, 1e-5f),
              Status::kSuccess);
    mix_rows(y.data(), cols * 2, stride * 2);
    EXPECT_EQ(cpu::softmax(in(x, stride), out(yf, cols), rows, cols), Status::kSuccess);
    mix_rows(yf.data(), cols * 4, cols * 4);
    EXPECT_EQ(cpu::logSoftmax(in(x, stride), out(y, stride), rows, cols), Status::kSuccess);
    mix_rows(y.data(), cols * 2, stride * 2);
  }
  result.row_hashes = hashes;
  return result;
}

TEST(RowOpsCpu, RowAloneEqualsRowInAnyBatchAndThreadCount) {
  for (int64_t cols : {1, 129, 4097}) {
    const int64_t stride = cols + 3, max_rows = 257;
    std::vector<bf16_t> x = randomValues<bf16_t>(max_rows * stride, cols, 3.0f);
    std::vector<bf16_t> w = randomValues<bf16_t>(cols, 1);
    std::vector<float> b = randomValues<float>(cols, 2);
    // Reference: each row computed alone, single thread.
    setCpuThreads(1);
    std::vector<uint64_t> alone(max_rows);
    for (int64_t i = 0; i < max_rows; ++i) {
      std::vector<bf16_t> row(x.begin() + i * stride, x.begin() + i * stride + cols);
      alone[i] = runAll(row, 1, cols, cols, w, b).row_hashes[0];
    }
    for (int threads : {1, 2, 3, 8}) {
      setCpuThreads(threads);
      for (int64_t rows : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{64}, max_rows}) {
        if (cols == 4097 && rows == 64 && threads != 2) continue;  // keep the runtime modest
        AllOps batch = runAll(x, rows, cols, stride, w, b);
        for (int64_t i = 0; i < rows; ++i) {
          ASSERT_EQ(batch.row_hashes[i], alone[i])
              << "cols=" << cols << " rows=" << rows << " threads=" << threads << " row=" << i;
        }
      }
    }
    setCpuThreads(0);
  }
}

TEST(RowOpsCpu, InPlaceEqualsOutOfPlace) {
  const int rows = 3, cols = 333;
  std::vector<bf16_t> x = randomValues<bf16_t>(rows * cols, 77), y(rows * cols);
  std::vector<bf16_t> w = randomValues<bf16_t>(cols, 78);
  ASSERT_EQ(cpu::rmsNorm(in(x, cols), vec(w), out(y, cols), rows, cols, 1e-6f), Status::kSuccess);
  std::vector<bf16_t> z = x;
  ASSERT_EQ(cpu::rmsNorm(in(z, cols), vec(w), out(z, cols), rows, cols, 1e-6f), Status::kSuccess);
  EXPECT_EQ(hashOf(y), hashOf(z));
  ASSERT_EQ(cpu::softmax(in(x, cols), out(y, cols), rows, cols), Status::kSuccess);
  z = x;
  ASSERT_EQ(cpu::softmax(in(z, cols), out(z, cols), rows, cols), Status::kSuccess);
  EXPECT_EQ(hashOf(y), hashOf(z));
}

// Golden pins: a change here is a change of the repops-1 spec (bump the version, never re-pin
// silently). Inputs: bf16 Normal(0, 3) rows from randomValues, 5 rows x 4097 cols, stride 4100.
TEST(RowOpsCpu, GoldenHashes) {
  const int64_t rows = 5, cols = 4097, stride = 4100;
  std::vector<bf16_t> x = randomValues<bf16_t>(rows * stride, 2024, 3.0f);
  std::vector<bf16_t> w = randomValues<bf16_t>(cols, 1);
  std::vector<float> b = randomValues<float>(cols, 2);
  AllOps all = runAll(x, rows, cols, stride, w, b);
  uint64_t combined = fnv1a(all.row_hashes.data(), all.row_hashes.size() * 8);
  const uint64_t kGolden = 0x41db549aa42a09ddull;
  std::printf("rowops golden: %s\n", test::hex64(combined).c_str());
  EXPECT_EQ(combined, kGolden);
}

// ---- argument errors -------------------------------------------------------------------------

TEST(RowOpsCpu, BadArgumentsAreRejected) {
  std::vector<float> x(64), y(64);
  float r = 0;
  EXPECT_EQ(cpu::reduceRows(ReduceOp::kSum, in(x, 8), &r, DType::kF32, 1, 0),
            Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("cols"), std::string::npos);
  EXPECT_EQ(cpu::reduceRows(ReduceOp::kSum, in(x, 8), &r, DType::kF32, -1, 8),
            Status::kInvalidArgument);
  EXPECT_EQ(cpu::reduceRows(ReduceOp::kSum, in(x, 4), y.data(), DType::kF32, 2, 8),
            Status::kInvalidArgument);  // stride < cols
  EXPECT_NE(std::string(lastErrorMessage()).find("row_stride"), std::string::npos);
  EXPECT_EQ(cpu::reduceRows(static_cast<ReduceOp>(99), in(x, 8), &r, DType::kF32, 1, 8),
            Status::kInvalidArgument);
  EXPECT_EQ(cpu::reduceRows(ReduceOp::kSum, in(x, 8), nullptr, DType::kF32, 1, 8),
            Status::kInvalidArgument);
  EXPECT_EQ(cpu::reduceRows(ReduceOp::kSum, RowsIn{nullptr, DType::kF32, 8}, &r, DType::kF32, 1, 8),
            Status::kInvalidArgument);
  EXPECT_EQ(cpu::reduceRows(ReduceOp::kSum, RowsIn{x.data(), static_cast<DType>(7), 8}, &r,
                            DType::kF32, 1, 8),
            Status::kInvalidArgument);
  EXPECT_EQ(
      cpu::reduceRows(ReduceOp::kSum, in(x, 8), &r, DType::kF32, 1, repops::kRowOpsMaxCols + 1),
      Status::kInvalidArgument);
  EXPECT_EQ(cpu::argmaxRows(in(x, 8), nullptr, 1, 8), Status::kInvalidArgument);
  EXPECT_EQ(cpu::cast(in(x, 8), RowsOut{nullptr, DType::kBF16, 8}, 1, 8), Status::kInvalidArgument);
  EXPECT_EQ(cpu::cast(in(x, 8), out(y, 8), 0, 8), Status::kSuccess);  // no rows: no-op
  Status s = cpu::rmsNorm(in(x, 8), VecIn{}, out(y, 8), 1, 8, -1.0f);
  EXPECT_EQ(s, Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("eps"), std::string::npos);
  EXPECT_EQ(cpu::rmsNorm(in(x, 8), VecIn{}, out(y, 8), 1, 8, NAN), Status::kInvalidArgument);
  EXPECT_EQ(cpu::rmsNorm(in(x, 8), VecIn{}, out(y, 8), 1, 8, 1e-6f, static_cast<RmsNormVariant>(5)),
            Status::kInvalidArgument);
  EXPECT_EQ(cpu::layerNorm(in(x, 8), VecIn{x.data(), static_cast<DType>(9)}, VecIn{}, out(y, 8), 1,
                           8, 1e-5f),
            Status::kInvalidArgument);
  EXPECT_EQ(cpu::softmax(in(x, 8), RowsOut{y.data(), DType::kF32, 2}, 2, 8),
            Status::kInvalidArgument);
}

}  // namespace
}  // namespace ree::repops
