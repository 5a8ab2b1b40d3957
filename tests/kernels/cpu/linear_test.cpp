// CPU linear layer against (1) an fp64 naive reference within a stated error bound, (2) the spec's
// scalar form (reduce.h canonicalDot, one output at a time) bitwise, and (3) itself: every row
// alone (M = 1) and inside larger M, for several thread counts and with/without SIMD, bitwise.
// A golden FNV-1a hash pins the bits of fixed inputs (spec stability, beside the checks above).
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/linear_problem.h"
#include "ree/core/parallel.h"
#include "ree/kernels/linear.h"
#include "ree/kernels/pointwise.h"
#include "ree/kernels/reduce.h"
#include "test_util.h"

namespace ree::repops {
namespace {

using HostTensor = test::HostBuffer;

struct Problem : test::LinearShape {
  HostTensor x, w, bias;

  void fill(uint64_t seed) {
    x = HostTensor(x_dtype, static_cast<size_t>(m * xs()), seed * 3 + 1, 1.0f);
    w = HostTensor(w_dtype, static_cast<size_t>(n * ws()), seed * 3 + 2, 0.05f);
    if (has_bias) bias = HostTensor(bias_dtype, static_cast<size_t>(n), seed * 3 + 3, 0.5f);
  }

  LinearArgs args(void* y) const { return LinearShape::args(x.data(), w.data(), bias.data(), y); }

  // Runs cpu::linear; output bytes (strided rows, padding left at 0xAB to catch stray writes).
  std::vector<uint8_t> run() const {
    std::vector<uint8_t> y(static_cast<size_t>((m * ys()) * dtypeSize(y_dtype)), 0xAB);
    Status status = cpu::linear(args(y.data()));
    EXPECT_EQ(status, Status::kSuccess) << lastErrorMessage();
    return y;
  }

  float yAt(const std::vector<uint8_t>& y, int64_t row, int64_t col) const {
    size_t i = static_cast<size_t>(row * ys() + col);
    if (y_dtype == DType::kF32) return reinterpret_cast<const float*>(y.data())[i];
    return toFloat(reinterpret_cast<const bf16_t*>(y.data())[i]);
  }

  // The spec's scalar form: canonicalDot of reduce.h, then linearFinish, then the output rounding.
  uint32_t specBits(int64_t row, int64_t col) const {
    float dot = canonicalDot(
        static_cast<int>(k), [&](int i) { return x.at(static_cast<size_t>(row * xs() + i)); },
        [&](int i) { return w.at(static_cast<size_t>(col * ws() + i)); });
    float b = has_bias ? bias.at(static_cast<size_t>(col)) : 0.0f;
    float value = detail::linearFinish(dot, has_bias, b);
    return y_dtype == DType::kF32 ? floatBits(value) : toBF16(value).bits;
  }

  uint32_t yBits(const std::vector<uint8_t>& y, int64_t row, int64_t col) const {
    size_t i = static_cast<size_t>(row * ys() + col);
    if (y_dtype == DType::kF32) return floatBits(reinterpret_cast<const float*>(y.data())[i]);
    return reinterpret_cast<const bf16_t*>(y.data())[i].bits;
  }
};

// Accuracy: |y - exact| <= (128 + ceil(K/128) + 2) * 2^-24 * (sum |x w| + |bias|), plus half a
// bf16 ulp of |exact| for bf16 output and 2^-140 of absolute slack for subnormal results. The
// first term bounds the fma chain (<= 128 roundings), the chunk merge and the bias add.
void checkAccuracy(const Problem& p, const std::vector<uint8_t>& y) {
  const double unit = std::ldexp(1.0, -24);
  const double gamma = (128.0 + std::ceil(p.k / 128.0) + 2.0) * unit;
  for (int64_t row = 0; row < p.m; ++row) {
    for (int64_t col = 0; col < p.n; ++col) {
      double exact = 0.0, magnitude = 0.0;
      for (int64_t i = 0; i < p.k; ++i) {
        double product = static_cast<double>(p.x.at(static_cast<size_t>(row * p.xs() + i))) *
                         p.w.at(static_cast<size_t>(col * p.ws() + i));
        exact += product;
        magnitude += std::fabs(product);
      }
      if (p.has_bias) {
        double b = p.bias.at(static_cast<size_t>(col));
        exact += b;
        magnitude += std::fabs(b);
      }
      double tolerance = gamma * magnitude + std::ldexp(1.0, -140);
      if (p.y_dtype == DType::kBF16) tolerance += std::ldexp(std::fabs(exact), -8);
      double got = p.yAt(y, row, col);
      ASSERT_LE(std::fabs(got - exact), tolerance)
          << p.describe() << " at (" << row << "," << col << ") got " << got << " exact " << exact;
    }
  }
}

void checkSpecBits(const Problem& p, const std::vector<uint8_t>& y) {
  for (int64_t row = 0; row < p.m; ++row) {
    for (int64_t col = 0; col < p.n; ++col) {
      ASSERT_EQ(p.yBits(y, row, col), p.specBits(row, col))
          << p.describe() << " at (" << row << "," << col << ")";
    }
  }
}

class ThreadGuard {
 public:
  ~ThreadGuard() {
    setCpuThreads(0);
    cpu::setLinearSimdEnabled(true);
  }
};

TEST(LinearCpu, AllDtypesMatchSpecAndFp64Reference) {
  uint64_t seed = 1;
  for (DType x_dtype : test::kLinearXTypes) {
    for (DType w_dtype : test::kLinearWTypes) {
      for (DType y_dtype : test::kLinearYTypes) {
        for (int bias_mode = 0; bias_mode < 3; ++bias_mode) {  // none, f32, same as w
          for (int64_t k : {1, 127, 128, 129, 1000}) {
            Problem p;
            p.m = 3;
            p.n = 21;
            p.k = k;
            p.setDtypes(x_dtype, w_dtype, y_dtype);
            p.has_bias = bias_mode != 0;
            p.bias_dtype = bias_mode == 2 ? w_dtype : DType::kF32;
            p.fill(seed++);
            auto y = p.run();
            checkSpecBits(p, y);
            checkAccuracy(p, y);
          }
        }
      }
    }
  }
}

TEST(LinearCpu, StridesAreHonouredAndPaddingUntouched) {
  Problem p;
  p.m = 5;
  p.n = 19;
  p.k = 130;
  p.x_stride = 133;
  p.w_stride = 141;
  p.y_stride = 23;
  p.x_dtype = DType::kBF16;
  p.y_dtype = DType::kBF16;
  p.has_bias = true;
  p.fill(77);
  auto y = p.run();
  checkSpecBits(p, y);
  checkAccuracy(p, y);
  for (int64_t row = 0; row < p.m; ++row) {
    for (int64_t col = p.n; col < p.ys() && row * p.ys() + col < p.m * p.ys(); ++col) {
      EXPECT_EQ(p.yBits(y, row, col), 0xABABu) << "padding written at row " << row;
    }
  }
}

// Each row gives the same bits alone (M = 1) as inside any M, for any thread count and with or
// without SIMD.
TEST(LinearCpu, RowsAreInvariantToBatchThreadsAndSimd) {
  ThreadGuard guard;
  for (int64_t k : {129, 1000}) {
    Problem big;
    big.m = 257;
    big.n = 37;
    big.k = k;
    big.x_dtype = DType::kBF16;
    big.w_dtype = DType::kBF16;
    big.has_bias = true;
    big.fill(k);
    setCpuThreads(1);
    cpu::setLinearSimdEnabled(false);
    const auto reference = big.run();  // one thread, scalar
    checkSpecBits(big, reference);
    for (int threads : {1, 2, 3, 7}) {
      setCpuThreads(threads);
      for (bool simd : {true, false}) {
        cpu::setLinearSimdEnabled(simd);
        for (int64_t m : {1, 2, 3, 5, 17, 63, 65, 129, 257}) {
          Problem part = big;
          part.m = m;
          // Rows [257 - m, 257) of the big problem as a smaller batch.
          part.x.bytes.assign(big.x.bytes.end() - m * big.xs() * dtypeSize(big.x_dtype),
                              big.x.bytes.end());
          auto y = part.run();
          size_t row_bytes = static_cast<size_t>(big.n * dtypeSize(big.y_dtype));
          ASSERT_EQ(0, std::memcmp(y.data(), reference.data() + (big.m - m) * row_bytes, y.size()))
              << "k=" << k << " m=" << m << " threads=" << threads << " simd=" << simd;
        }
      }
    }
  }
}

// The SIMD path packs whole 16-feature panels of fp32 and bf16 weights by 8 x 8 register
// transposes (k tails and partial panels go through the scalar packing). Its outputs must equal the
// scalar path's bit for bit, for every weight type, with NaNs, infinities, -0 and denormals placed
// in both halves of a panel and in the k tail.
TEST(LinearCpu, SimdPanelPackingKeepsEveryWeightBit) {
  ThreadGuard guard;
  setCpuThreads(1);
  for (DType w_dtype : test::kLinearWTypes) {
    for (int64_t n : {16, 33}) {
      for (int64_t k : {1, 7, 8, 9, 130}) {
        for (bool with_nan : {false, true}) {
          Problem p;
          p.m = 3;
          p.n = n;
          p.k = k;
          p.w_dtype = w_dtype;
          p.w_stride = k + (n == 33 ? 3 : 0);
          p.fill(static_cast<uint64_t>(n * 1000 + k));
          // Specials as raw bits: (NaN with a payload,) -inf, +inf, -0, smallest denormal.
          std::vector<uint32_t> specials;
          switch (w_dtype) {
            case DType::kF32:
              specials = {0xff800000u, 0x7f800000u, 0x80000000u, 0x00000001u};
              if (with_nan) specials.push_back(0x7fc00123u);
              break;
            case DType::kBF16:
              specials = {0xff80u, 0x7f80u, 0x8000u, 0x0001u};
              if (with_nan) specials.push_back(0x7fc3u);
              break;
            case DType::kF16:
              specials = {0xfc00u, 0x7c00u, 0x8000u, 0x0001u};
              if (with_nan) specials.push_back(0x7e05u);
              break;
          }
          const size_t element = dtypeSize(w_dtype);
          for (size_t i = 0; i < specials.size(); ++i) {
            // Features 3 and 12 (both halves of the first panel), at the start and in the tail.
            for (int64_t feature : {int64_t{3}, int64_t{12}}) {
              const int64_t kk = i % 2 == 0 ? static_cast<int64_t>(i) % k : k - 1;
              std::memcpy(p.w.bytes.data() + (feature * p.ws() + kk) * element, &specials[i],
                          element);
            }
          }
          cpu::setLinearSimdEnabled(false);
          const auto scalar = p.run();
          cpu::setLinearSimdEnabled(true);
          const auto simd = p.run();
          ASSERT_EQ(0, std::memcmp(scalar.data(), simd.data(), scalar.size()))
              << p.describe() << " nan=" << with_nan;
          if (!with_nan) checkSpecBits(p, simd);
        }
      }
    }
  }
}

// Underflow makes a chunk partial -0; the merge and the bias-free output must keep it (a kernel
// that pads k with +0 * +0 or starts the merge from +0 would turn it into +0).
TEST(LinearCpu, NegativeZeroAndSpecialValues) {
  Problem p;
  p.m = 1;
  p.n = 5;
  p.k = 129;
  p.x_dtype = DType::kF32;
  p.w_dtype = DType::kF32;
  p.fill(5);
  // x = -0 and w = +0 everywhere make every other product -0, which keeps a -0 partial (a +0
  // product would turn it into +0: -0 + +0 = +0).
  for (int64_t i = 0; i < p.k; ++i) {
    p.x.set(static_cast<size_t>(i), -0.0f);
    for (int64_t col = 0; col < p.n; ++col)
      p.w.set(static_cast<size_t>(col * p.k + i), 0.0f);
  }
  // Column 0: both chunks underflow to -0 -> -0. Column 1: +inf. Column 2: inf - inf -> NaN.
  // Column 3: +0 (products -0 added to the +0 start). Column 4: NaN input -> canonical NaN.
  p.x.set(0, -1e-30f);
  p.x.set(128, 1e-30f);
  p.w.set(0 * p.k + 0, 1e-30f);
  p.w.set(0 * p.k + 128, -1e-30f);
  p.w.set(0 * p.k + 5, -0.0f);
  p.w.set(0 * p.k + 6, -0.0f);
  p.x.set(5, 3e38f);
  p.w.set(1 * p.k + 5, 1e10f);
  p.x.set(6, 3e38f);
  p.w.set(2 * p.k + 5, INFINITY);  // fma never overflows its product: use infinite inputs
  p.w.set(2 * p.k + 6, -INFINITY);
  p.w.set(4 * p.k + 9, bitsFloat(0xffc12345u));  // a negative NaN with a payload
  for (bool simd : {true, false}) {
    cpu::setLinearSimdEnabled(simd);
    auto y = p.run();
    EXPECT_EQ(p.yBits(y, 0, 0), 0x80000000u);
    EXPECT_EQ(p.yBits(y, 0, 1), 0x7f800000u);
    EXPECT_EQ(p.yBits(y, 0, 2), 0x7fc00000u);  // canonical NaN
    EXPECT_EQ(p.yBits(y, 0, 3), 0x00000000u);
    EXPECT_EQ(p.yBits(y, 0, 4), 0x7fc00000u);
    checkSpecBits(p, y);
  }
  cpu::setLinearSimdEnabled(true);
}

// accumulate: Y = add(Y, linear output) is bitwise the separate linear layer (into a tensor of Y's
// dtype) followed by the pointwise add of pointwise.h, for fp32 and bf16 Y, with and without SIMD,
// including Y values that are infinite, NaN or -0 and outputs that cancel them.
TEST(LinearCpu, AccumulateIsLinearThenAdd) {
  for (DType y_dtype : {DType::kF32, DType::kBF16}) {
    for (bool simd : {true, false}) {
      cpu::setLinearSimdEnabled(simd);
      Problem p;
      p.m = 7;
      p.n = 45;
      p.k = 300;
      p.y_dtype = y_dtype;
      p.has_bias = true;
      p.fill(21);
      HostTensor old_y(y_dtype, static_cast<size_t>(p.m * p.n), 99, 2.0f);
      old_y.set(0, INFINITY);
      old_y.set(1, -INFINITY);
      old_y.set(2, bitsFloat(0xffc12345u));
      old_y.set(3, -0.0f);
      std::vector<uint8_t> separate = p.run();  // dense: y_stride 0
      std::vector<uint8_t> expected(old_y.bytes.size());
      ASSERT_EQ(cpu::add(y_dtype, old_y.data(), separate.data(), expected.data(), p.m * p.n),
                Status::kSuccess);
      std::vector<uint8_t> got = old_y.bytes;
      LinearArgs a = p.args(got.data());
      a.accumulate = true;
      ASSERT_EQ(cpu::linear(a), Status::kSuccess) << lastErrorMessage();
      EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), got.size()))
          << dtypeName(y_dtype) << " simd=" << simd;
      // Element 2 was a NaN with a sign and payload: the sum is the canonical NaN.
      const uint32_t nan_bits = y_dtype == DType::kF32
                                    ? floatBits(reinterpret_cast<const float*>(got.data())[2])
                                    : reinterpret_cast<const bf16_t*>(got.data())[2].bits;
      EXPECT_EQ(nan_bits, y_dtype == DType::kF32 ? 0x7fc00000u : 0x7fc0u);
    }
  }
  cpu::setLinearSimdEnabled(true);
}

// Spec-stability pin: the FNV-1a hash of the output on fixed inputs. A change here means the bits
// of repops-1 linear changed; the checks above say whether the new bits are still correct.
TEST(LinearCpu, GoldenHashPin) {
  Problem p;
  p.m = 7;
  p.n = 33;
  p.k = 300;
  p.x_dtype = DType::kBF16;
  p.w_dtype = DType::kBF16;
  p.y_dtype = DType::kF32;
  p.has_bias = true;
  p.bias_dtype = DType::kBF16;
  p.fill(2024);
  auto y = p.run();
  checkSpecBits(p, y);
  Problem q = p;
  q.y_dtype = DType::kBF16;
  q.w_dtype = DType::kF16;
  q.has_bias = false;
  q.fill(2025);
  auto yq = q.run();
  checkSpecBits(q, yq);
  uint64_t hash = test::fnv1a(yq.data(), yq.size(), test::fnv1a(y.data(), y.size()));
  // Inputs come from std::mt19937_64 + std::normal_distribution (libstdc++); the pin assumes it.
  EXPECT_EQ(test::hex64(hash), "9402507521006096") << "linear golden hash changed";
}

TEST(LinearCpu, BadArgumentsAreRejected) {
  Problem p;
  p.m = 2;
  p.n = 3;
  p.k = 4;
  p.fill(9);
  std::vector<float> y(6);
  auto expectInvalid = [&](LinearArgs a, const char* what) {
    clearError();
    EXPECT_EQ(cpu::linear(a), Status::kInvalidArgument) << what;
    EXPECT_NE(std::string(lastErrorMessage()), "") << what;
  };
  LinearArgs good = p.args(y.data());
  ASSERT_EQ(cpu::linear(good), Status::kSuccess);
  LinearArgs a = good;
  a.x = nullptr;
  expectInvalid(a, "null x");
  a = good;
  a.w = nullptr;
  expectInvalid(a, "null w");
  a = good;
  a.y = nullptr;
  expectInvalid(a, "null y");
  a = good;
  a.k = 0;
  expectInvalid(a, "k = 0");
  a = good;
  a.n = 0;
  expectInvalid(a, "n = 0");
  a = good;
  a.m = -1;
  expectInvalid(a, "m < 0");
  a = good;
  a.x_row_stride = 3;
  expectInvalid(a, "x stride < k");
  a = good;
  a.w_row_stride = 2;
  expectInvalid(a, "w stride < k");
  a = good;
  a.y_row_stride = 1;
  expectInvalid(a, "y stride < n");
  a = good;
  a.x_dtype = DType::kF16;
  expectInvalid(a, "x f16");
  a = good;
  a.y_dtype = DType::kF16;
  expectInvalid(a, "y f16");
  a = good;
  a.w_dtype = static_cast<DType>(7);
  expectInvalid(a, "w dtype");
  a = good;
  a.bias = p.w.data();
  a.bias_dtype = DType::kF16;  // w is bf16
  expectInvalid(a, "bias dtype");
  a = good;
  a.y = const_cast<void*>(p.x.data());
  expectInvalid(a, "y overlaps x");
  EXPECT_NE(std::string(lastErrorMessage()).find("overlaps"), std::string::npos);
  a = good;
  a.m = 0;
  a.x = nullptr;
  a.y = nullptr;
  EXPECT_EQ(cpu::linear(a), Status::kSuccess) << "m = 0 is a no-op";
}

// Random shapes, dtypes and strides against the spec form: 25 cases in CI, 200 with
// REE_TEST_FULL=1.
TEST(LinearCpu, RandomShapes) {
  const char* full = std::getenv("REE_TEST_FULL");
  int iterations = (full && std::string(full) == "1") ? 200 : 25;
  std::mt19937_64 rng(123);
  for (int iter = 0; iter < iterations; ++iter) {
    Problem p;
    p.m = 1 + rng() % 70;
    p.n = 1 + rng() % 70;
    p.k = 1 + rng() % 700;
    p.x_dtype = test::kLinearXTypes[rng() % 2];
    p.w_dtype = test::kLinearWTypes[rng() % 3];
    p.y_dtype = test::kLinearYTypes[rng() % 2];
    p.has_bias = rng() % 2;
    p.bias_dtype = rng() % 2 ? DType::kF32 : p.w_dtype;
    p.x_stride = rng() % 2 ? p.k + rng() % 5 : 0;
    p.w_stride = rng() % 2 ? p.k + rng() % 5 : 0;
    p.fill(1000 + iter);
    auto y = p.run();
    checkSpecBits(p, y);
    checkAccuracy(p, y);
  }
}

}  // namespace
}  // namespace ree::repops
