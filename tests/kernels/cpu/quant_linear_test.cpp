// CPU linear over GGUF blocks (quant_linear.h) == dequantise to fp32 + repops-1 cpu::linear,
// bitwise: every block type, odd K multiples of the block (across the CUDA GEMV's 4096-wide
// windows), M = 1..70, odd N, strides, bias, accumulate, bf16 x and y, 1 and 3 threads; and the
// argument checks.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/quant_linear_problem.h"
#include "ree/core/parallel.h"
#include "ree/kernels/linear.h"
#include "ree/kernels/quant_linear.h"
#include "test_util.h"

namespace ree::repops {
namespace {

std::vector<unsigned char> runCpu(const test::QuantProblem& p) {
  std::vector<unsigned char> y = p.y_init;
  Status s = cpu::quantLinear(p.args(p.w.data(), p.x.data(), p.bias_bytes.data(), y.data()));
  EXPECT_EQ(s, Status::kSuccess) << lastErrorMessage();
  return y;
}

// Odd multiples of the block: one block, a few, and past 4096 (two GEMV windows, a partial chunk
// for the 32-element types).
std::vector<int64_t> oddKs(QuantType type) {
  const int64_t b = quantBlockElems(type);
  return b == 32 ? std::vector<int64_t>{32, 96, 544, 4128} : std::vector<int64_t>{256, 768, 4352};
}

TEST(QuantLinearCpu, EveryTypeMatchesDequantisedLinearBitwise) {
  std::mt19937_64 rng(2525);
  const int64_t ms[] = {1, 2, 3, 5, 16, 17, 64, 65, 70};
  for (QuantType type : test::kAllQuantTypes) {
    for (int64_t k : oddKs(type)) {
      for (int rep = 0; rep < 3; ++rep) {
        test::QuantProblem p;
        p.type = type;
        p.k = k;
        p.m = ms[rng() % (sizeof(ms) / sizeof(ms[0]))];
        p.n = 1 + 2 * static_cast<int64_t>(rng() % 40);
        p.bias = rng() % 2;
        p.accumulate = rep == 2;
        p.x_dtype = rng() % 3 == 0 ? DType::kBF16 : DType::kF32;
        p.y_dtype = rng() % 3 == 0 ? DType::kBF16 : DType::kF32;
        p.fill(rng());
        const std::vector<unsigned char> expected = p.reference();
        ASSERT_FALSE(expected.empty()) << lastErrorMessage();
        EXPECT_EQ(test::firstBitDifference(expected, runCpu(p)), -1) << p.describe();
      }
    }
  }
}

TEST(QuantLinearCpu, RowsAcrossSlicesStridesAndThreads) {
  // n large enough for several 8 MiB slices of dequantised rows; padded rows and strides.
  test::QuantProblem p;
  p.type = QuantType::kQ4_K;
  p.k = 2048;
  p.n = 1100;
  p.m = 3;
  p.w_pad = 6;
  p.x_pad = 3;
  p.y_pad = 5;
  p.bias = true;
  p.fill(77);
  const std::vector<unsigned char> expected = p.reference();
  const int threads = cpuThreads();
  for (int t : {1, 3}) {
    setCpuThreads(t);
    EXPECT_EQ(test::firstBitDifference(expected, runCpu(p)), -1)
        << p.describe() << " threads=" << t;
  }
  setCpuThreads(threads);
}

// cpu::linear packs the dequantised rows into panels with the AVX2 transpose (full panels, where
// the CPU has it) or the portable loop: both give the reference's bits.
TEST(QuantLinearCpu, PortableAndSimdPanelsGiveTheSameBits) {
  for (QuantType type : {QuantType::kQ4_1, QuantType::kQ5_K, QuantType::kQ8_0}) {
    test::QuantProblem p;
    p.type = type;
    p.k = quantBlockElems(type) == 32 ? 608 : 512;
    p.n = 40;  // two full panels and one of 8
    p.m = 2;
    p.bias = true;
    p.fill(31 + static_cast<int>(type));
    const std::vector<unsigned char> expected = p.reference();
    for (bool simd : {false, true}) {
      cpu::setLinearSimdEnabled(simd);
      EXPECT_EQ(test::firstBitDifference(expected, runCpu(p)), -1)
          << p.describe() << " simd=" << simd;
    }
  }
}

TEST(QuantLinearCpu, RowInvariance) {
  // Row r of a batch has the bits of row r alone (the decode/prefill invariance of repops-1).
  test::QuantProblem p;
  p.type = QuantType::kQ6_K;
  p.k = 768;
  p.n = 33;
  p.m = 70;
  p.fill(5);
  const std::vector<unsigned char> batch = runCpu(p);
  for (int64_t r : {0, 31, 69}) {
    test::QuantProblem one = p;
    one.m = 1;
    one.x.assign(p.x.begin() + r * p.k * 4, p.x.begin() + (r + 1) * p.k * 4);
    one.y_init.assign(p.y_init.begin() + r * p.n * 4, p.y_init.begin() + (r + 1) * p.n * 4);
    const std::vector<unsigned char> alone = runCpu(one);
    std::vector<unsigned char> row(batch.begin() + r * p.n * 4, batch.begin() + (r + 1) * p.n * 4);
    EXPECT_EQ(test::firstBitDifference(row, alone), -1) << "row " << r;
  }
}

// The GPU kernel reads the K types 64 elements at a time (dequantizeSub64: two sub-blocks from
// one read of their code bytes); the values must be dequantizeSub32's.
TEST(QuantBlocks, PairsAreTheSubBlocksValues) {
  std::mt19937_64 rng(41);
  for (QuantType type : {QuantType::kQ4_K, QuantType::kQ5_K, QuantType::kQ6_K}) {
    test::QuantProblem p;
    p.type = type;
    p.k = 256 * 4;
    p.n = 3;
    p.fill(rng());
    for (int64_t block = 0; block < p.n * 4; ++block) {
      const unsigned char* b = p.w.data() + block * quantBlockBytes(type);
      for (int pair = 0; pair < 4; ++pair) {
        float pair_values[64], sub_values[64];
        if (type == QuantType::kQ4_K) dequantizeSub64<QuantType::kQ4_K>(b, pair, pair_values);
        if (type == QuantType::kQ5_K) dequantizeSub64<QuantType::kQ5_K>(b, pair, pair_values);
        if (type == QuantType::kQ6_K) dequantizeSub64<QuantType::kQ6_K>(b, pair, pair_values);
        dequantizeSub32(type, b, 2 * pair, sub_values);
        dequantizeSub32(type, b, 2 * pair + 1, sub_values + 32);
        ASSERT_EQ(std::memcmp(pair_values, sub_values, sizeof(sub_values)), 0)
            << quantTypeName(type) << " block " << block << " pair " << pair;
      }
    }
  }
}

TEST(QuantEmbeddingCpu, RowsAreTheDequantisedTableRows) {
  std::mt19937_64 rng(31);
  for (QuantType type : test::kAllQuantTypes) {
    test::QuantProblem p;
    p.type = type;
    p.k = quantBlockElems(type) * 3;
    p.n = 9;  // table rows
    p.w_pad = 4;
    p.fill(rng());
    const std::vector<int32_t> ids = {3, 0, 8, 3};
    QuantEmbeddingArgs a;
    a.table = p.w.data();
    a.type = type;
    a.rows = p.n, a.k = p.k, a.row_bytes = p.wRowBytes();
    a.ids = ids.data();
    a.count = static_cast<int64_t>(ids.size());
    std::vector<float> out(ids.size() * p.k), expected(ids.size() * p.k);
    a.out = out.data();
    ASSERT_EQ(cpu::quantEmbedding(a), Status::kSuccess) << lastErrorMessage();
    for (size_t t = 0; t < ids.size(); ++t) {
      dequantizeBlocks(type, p.w.data() + ids[t] * p.wRowBytes(), p.k, expected.data() + t * p.k);
    }
    EXPECT_EQ(test::firstBitDifference(expected, out), -1) << quantTypeName(type);
    const std::vector<int32_t> bad = {9};
    a.ids = bad.data();
    a.count = 1;
    EXPECT_EQ(cpu::quantEmbedding(a), Status::kInvalidArgument);
  }
}

TEST(QuantLinearCpu, RefusesBadArguments) {
  test::QuantProblem p;
  p.type = QuantType::kQ4_0;
  p.k = 64;
  p.n = 3;
  p.m = 2;
  p.fill(1);
  std::vector<unsigned char> y = p.y_init;
  auto base = [&] { return p.args(p.w.data(), p.x.data(), p.bias_bytes.data(), y.data()); };
  QuantLinearArgs a = base();
  a.linear.k = 48;  // not a multiple of 32
  EXPECT_EQ(cpu::quantLinear(a), Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("multiple"), std::string::npos);
  a = base();
  a.w_type = static_cast<QuantType>(99);
  EXPECT_EQ(cpu::quantLinear(a), Status::kInvalidArgument);
  a = base();
  a.w_row_bytes = p.rowBytes() - 1;
  EXPECT_EQ(cpu::quantLinear(a), Status::kInvalidArgument);
  a = base();
  a.linear.bias = p.bias_bytes.data();
  a.linear.bias_dtype = DType::kBF16;
  EXPECT_EQ(cpu::quantLinear(a), Status::kInvalidArgument);
  a = base();
  a.linear.y = const_cast<unsigned char*>(p.w.data());
  EXPECT_EQ(cpu::quantLinear(a), Status::kInvalidArgument);
  a = base();
  a.linear.w = nullptr;
  EXPECT_EQ(cpu::quantLinear(a), Status::kInvalidArgument);
  a = base();
  a.linear.m = 0;
  a.linear.x = nullptr;
  EXPECT_EQ(cpu::quantLinear(a), Status::kSuccess);
}

}  // namespace
}  // namespace ree::repops
