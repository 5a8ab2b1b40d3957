// The CPU kernels' AVX2+FMA build (kernels/src/cpu/vector_math.h) against their portable x86-64
// build, bitwise: the correctly rounded math on every 4099th fp32 bit pattern and the special
// values, the activations and gated activations, the row operations and RoPE, for every dtype
// (attention: attention_test.cpp). Both builds run on one machine through setVectorMathEnabled; on
// a CPU without AVX2 and FMA both are the portable build and the tests skip, saying so.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "ree/kernels/math_ops.h"
#include "ree/kernels/pointwise.h"
#include "ree/kernels/rope.h"
#include "ree/kernels/rowops.h"
#include "test_util.h"

namespace ree::repops {
namespace {

bool cpuHasAvx2Fma() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

#define SKIP_WITHOUT_AVX2_FMA()                                      \
  if (!cpuHasAvx2Fma())                                              \
  GTEST_SKIP() << "this CPU has no AVX2 and FMA: only the portable " \
                  "build runs here"

// run() under the portable build, then under the AVX2+FMA build: the raw bytes of each.
std::vector<std::vector<uint8_t>> bothBuilds(const std::function<std::vector<uint8_t>()>& run) {
  cpu::setVectorMathEnabled(false);
  std::vector<uint8_t> portable = run();
  cpu::setVectorMathEnabled(true);
  std::vector<uint8_t> vector = run();
  return {portable, vector};
}

template <typename T>
std::vector<uint8_t> bytesOf(const std::vector<T>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return std::vector<uint8_t>(p, p + v.size() * sizeof(T));
}

// Where two byte arrays first differ, as an element index of `element_bytes` (-1: equal).
long long firstDifference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                          size_t element_bytes) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<long long>(i / element_bytes);
  }
  return -1;
}

using test::dtypeOf;

// Rows of N(0, scale) values salted with zeros of both signs, infinities, subnormals and NaNs.
template <typename T>
std::vector<T> saltedRows(size_t count, uint64_t seed, float scale) {
  std::vector<T> v = test::randomValues<T>(count, seed, scale);
  const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, 0x1p-140f, NAN, 88.5f, -104.0f};
  for (size_t i = 0; i < count; i += 97)
    v[i] = storeAs<T>(specials[(i / 97) % 8]);
  return v;
}

TEST(VectorMath, CorrectlyRoundedMathEqualsThePortableBuild) {
  SKIP_WITHOUT_AVX2_FMA();
  std::vector<float> x;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4099)
    x.push_back(bitsFloat(static_cast<uint32_t>(bits)));
  for (uint32_t bits : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                        0x00000001u, 0x3f800000u, 0xbf800000u, 0x42b17218u, 0xc2ce8ed0u}) {
    x.push_back(bitsFloat(bits));
  }
  for (int op = 0; op < kUnaryMathOpCount; ++op) {
    const auto kind = static_cast<UnaryMathOp>(op);
    auto builds = bothBuilds([&] {
      std::vector<float> y(x.size());
      EXPECT_EQ(cpu::unaryMath(kind, x.data(), y.data(), static_cast<int64_t>(x.size())),
                Status::kSuccess);
      return bytesOf(y);
    });
    const long long at = firstDifference(builds[0], builds[1], 4);
    EXPECT_EQ(at, -1) << unaryMathOpName(kind) << " differs at input bits 0x" << std::hex
                      << (at < 0 ? 0u : floatBits(x[static_cast<size_t>(at)]));
  }
}

template <typename T>
void checkActivations() {
  const int64_t rows = 37, cols = 301;
  const std::vector<T> x = saltedRows<T>(rows * cols, 11, 4.0f);
  const std::vector<T> up = saltedRows<T>(rows * cols, 12, 2.0f);
  for (Activation act : {Activation::kSilu, Activation::kGeluErf, Activation::kGeluTanh}) {
    auto single = bothBuilds([&] {
      std::vector<T> y(x.size());
      EXPECT_EQ(cpu::activation(act, dtypeOf<T>(), x.data(), y.data(), rows * cols),
                Status::kSuccess);
      return bytesOf(y);
    });
    EXPECT_EQ(firstDifference(single[0], single[1], sizeof(T)), -1)
        << activationName(act) << " " << dtypeName(dtypeOf<T>());
    auto gated = bothBuilds([&] {
      std::vector<T> y(x.size());
      EXPECT_EQ(cpu::gated(act, dtypeOf<T>(), x.data(), cols, up.data(), cols, y.data(), cols, rows,
                           cols),
                Status::kSuccess);
      return bytesOf(y);
    });
    EXPECT_EQ(firstDifference(gated[0], gated[1], sizeof(T)), -1)
        << "gated " << activationName(act) << " " << dtypeName(dtypeOf<T>());
  }
}

TEST(VectorMath, ActivationsEqualThePortableBuild) {
  SKIP_WITHOUT_AVX2_FMA();
  checkActivations<float>();
  checkActivations<bf16_t>();
  checkActivations<f16_t>();
}

template <typename T>
void checkRowOps(int64_t rows, int64_t cols) {
  const DType dtype = dtypeOf<T>();
  const std::vector<T> x = saltedRows<T>(static_cast<size_t>(rows * cols), 21 + cols, 3.0f);
  const std::vector<T> w = test::randomValues<T>(static_cast<size_t>(cols), 22);
  const std::vector<T> b = test::randomValues<T>(static_cast<size_t>(cols), 23);
  const RowsIn in{x.data(), dtype, cols};
  const VecIn wv{w.data(), dtype}, bv{b.data(), dtype};
  using RowRun = std::function<Status(RowsOut)>;
  const std::vector<std::pair<const char*, RowRun>> ops = {
      {"rmsNorm", [&](RowsOut y) { return cpu::rmsNorm(in, wv, y, rows, cols, 1e-6f); }},
      {"rmsNorm cast first",
       [&](RowsOut y) {
         return cpu::rmsNorm(in, wv, y, rows, cols, 1e-5f, RmsNormVariant::kCastBeforeWeight);
       }},
      {"layerNorm", [&](RowsOut y) { return cpu::layerNorm(in, wv, bv, y, rows, cols, 1e-5f); }},
      {"softmax", [&](RowsOut y) { return cpu::softmax(in, y, rows, cols); }},
      {"logSoftmax", [&](RowsOut y) { return cpu::logSoftmax(in, y, rows, cols); }},
  };
  for (const auto& [name, run] : ops) {
    auto builds = bothBuilds([&] {
      std::vector<T> y(x.size());
      EXPECT_EQ(run(RowsOut{y.data(), dtype, cols}), Status::kSuccess) << name;
      return bytesOf(y);
    });
    EXPECT_EQ(firstDifference(builds[0], builds[1], sizeof(T)), -1)
        << name << " " << dtypeName(dtype) << " " << rows << "x" << cols;
  }
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kVar, ReduceOp::kMax, ReduceOp::kMin}) {
    auto builds = bothBuilds([&] {
      std::vector<float> y(static_cast<size_t>(rows));
      EXPECT_EQ(cpu::reduceRows(op, in, y.data(), DType::kF32, rows, cols), Status::kSuccess);
      return bytesOf(y);
    });
    EXPECT_EQ(firstDifference(builds[0], builds[1], 4), -1)
        << reduceOpName(op) << " " << dtypeName(dtype) << " " << rows << "x" << cols;
  }
}

TEST(VectorMath, RowOperationsEqualThePortableBuild) {
  SKIP_WITHOUT_AVX2_FMA();
  for (auto [rows, cols] :
       {std::pair<int64_t, int64_t>{5, 1}, {9, 127}, {33, 129}, {3, 1000}, {2, 4097}}) {
    checkRowOps<float>(rows, cols);
    checkRowOps<bf16_t>(rows, cols);
    checkRowOps<f16_t>(rows, cols);
  }
}

// RoPE's cos/sin (crSin, crCos of fp32 angles, positions up to 2^17) and the rotation, both
// layouts, a partial rotary dimension, every dtype.
template <typename T>
void checkRope() {
  const int tokens = 40, heads = 3, head_dim = 96, rotary_dim = 64;
  std::vector<int32_t> positions(tokens);
  for (int t = 0; t < tokens; ++t)
    positions[t] = t * 3271 % 131072;
  std::vector<float> inv_freq(rotary_dim / 2);
  ASSERT_EQ(cpu::ropeInvFreq(500000.0f, rotary_dim, nullptr, inv_freq.data()), Status::kSuccess);
  const std::vector<T> x = test::randomValues<T>(size_t(tokens) * heads * head_dim, 31);
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    auto builds = bothBuilds([&] {
      std::vector<T> y = x;
      EXPECT_EQ(cpu::rope(dtypeOf<T>(), y.data(), tokens, heads, head_dim, heads * head_dim,
                          positions.data(), inv_freq.data(), rotary_dim, layout),
                Status::kSuccess);
      return bytesOf(y);
    });
    EXPECT_EQ(firstDifference(builds[0], builds[1], sizeof(T)), -1) << dtypeName(dtypeOf<T>());
  }
}

TEST(VectorMath, RopeEqualsThePortableBuild) {
  SKIP_WITHOUT_AVX2_FMA();
  checkRope<float>();
  checkRope<bf16_t>();
  checkRope<f16_t>();
}

}  // namespace
}  // namespace ree::repops
