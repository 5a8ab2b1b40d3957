// CUDA repops-2 linear == CPU repops-2 linear, bitwise (the CPU is checked against the spec's
// brute-force form in tests/kernels/cpu/int_linear_test.cpp): randomised odd shapes (M up to 300,
// K up to 4096 + odd, odd N, strides, every dtype combination, bias, accumulate), special values
// (NaN/inf in a block, subnormals, huge and tiny values together, zeros), and row invariance on
// the GPU (a row alone and inside batches of other sizes).
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/linear_problem.h"
#include "ree/kernels/int_linear.h"

namespace ree::repops {
namespace {

// The CPU test's problem (tests/kernels/linear_problem.h) with device copies; the bias and y
// tensors are always filled (the GPU gets valid pointers even without a bias).
struct Problem : test::LinearShape {
  test::MirroredBuffer x, w, bias, y_init;

  void fill(uint64_t seed, bool hostile, bool non_finite) {
    std::mt19937_64 rng(seed);
    test::fillHostileInputs(rng, *this, hostile, non_finite, x, w);
    bias.reset(bias_dtype, static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      bias.set(static_cast<size_t>(i), test::hostileValue(rng, 0.5f, false));
    y_init.reset(y_dtype, static_cast<size_t>(m * ys()));
    for (size_t i = 0; i < static_cast<size_t>(m * ys()); ++i)
      y_init.set(i, test::hostileValue(rng, 1.0f, false));
  }

  std::vector<uint8_t> runCpu() const {
    std::vector<uint8_t> y = y_init.bytes;
    Status s = cpu::intLinear(args(x.bytes.data(), w.bytes.data(), bias.bytes.data(), y.data()));
    EXPECT_EQ(s, Status::kSuccess) << lastErrorMessage();
    return y;
  }

  std::vector<uint8_t> runCuda() {
    x.upload();
    w.upload();
    bias.upload();
    uint8_t* y = test::toDevice(y_init.bytes);
    Status s = cuda::intLinear(args(x.device, w.device, bias.device, y), nullptr);
    EXPECT_EQ(s, Status::kSuccess) << lastErrorMessage();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> out = test::toHost(y, y_init.bytes.size());
    cudaFree(y);
    return out;
  }
};

void expectSameBits(Problem& p) {
  std::vector<uint8_t> cpu_y = p.runCpu();
  std::vector<uint8_t> gpu_y = p.runCuda();
  long long at = test::firstBitDifference(cpu_y, gpu_y);
  EXPECT_EQ(at, -1) << p.describe() << " first differing byte " << at;
}

TEST(IntLinearCuda, RandomShapesMatchCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(2323);
  test::forEachLinearDtypes([&](DType x_dtype, DType w_dtype, DType y_dtype) {
    for (int rep = 0; rep < 3; ++rep) {
      Problem p;
      p.setDtypes(x_dtype, w_dtype, y_dtype);
      p.m = 1 + static_cast<int64_t>(rng() % (rep == 0 ? 300 : 20));
      p.n = 1 + 2 * static_cast<int64_t>(rng() % 100);
      p.k = 1 + static_cast<int64_t>(rng() % (rep == 2 ? 4200 : 900));
      test::randomizeIntLinearLayout(rng, p);
      p.fill(rng(), /*hostile=*/rep != 2, /*non_finite=*/rep == 1);
      expectSameBits(p);
      if (HasFailure()) return false;
    }
    return true;
  });
}

// Model-like shapes: K = 4096 + 3, a few hundred outputs, M across the tile boundaries.
TEST(IntLinearCuda, LargeKAndTileEdgesMatchCpu) {
  REE_SKIP_WITHOUT_GPU();
  for (int64_t m : {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{65}, int64_t{300}}) {
    Problem p;
    p.m = m;
    p.n = 129;
    p.k = 4099;
    p.x_dtype = DType::kF32;
    p.w_dtype = DType::kBF16;
    p.fill(static_cast<uint64_t>(m), false, false);
    expectSameBits(p);
  }
}

TEST(IntLinearCuda, SpecialValuesMatchCpu) {
  REE_SKIP_WITHOUT_GPU();
  Problem p;
  p.m = 6;
  p.n = 7;
  p.k = 300;
  p.w_dtype = DType::kF32;
  p.has_bias = true;
  p.fill(77, false, false);
  p.x.set(0 * 300 + 3, NAN);
  p.x.set(1 * 300 + 299, INFINITY);
  p.w.set(2 * 300 + 128, -INFINITY);
  for (int i = 0; i < 300; ++i) {
    p.x.set(static_cast<size_t>(2 * 300 + i), bitsFloat(1u + static_cast<uint32_t>(i)));
    p.x.set(static_cast<size_t>(3 * 300 + i), i == 5 ? 3e38f : (i % 2 ? 1e-38f : 0.0f));
    p.x.set(static_cast<size_t>(4 * 300 + i), i % 2 ? -0.0f : 0.0f);
    // The largest digits: |W| rounds up to 2^20, x's integers reach 2^27 - 8.
    p.w.set(static_cast<size_t>(3 * 300 + i), (i % 3 ? 1.0f : -1.0f) * 0.99999994f);
    p.w.set(static_cast<size_t>(4 * 300 + i), -0.99999994f);
    p.x.set(static_cast<size_t>(5 * 300 + i), (i % 5 ? -1.0f : 1.0f) * 0.99999994f);
  }
  std::vector<uint8_t> gpu_y = p.runCuda();
  std::vector<uint8_t> cpu_y = p.runCpu();
  EXPECT_EQ(test::firstBitDifference(cpu_y, gpu_y), -1);
  uint32_t first;
  std::memcpy(&first, gpu_y.data(), 4);
  EXPECT_EQ(first, 0x7fc00000u);
}

// A row's bits do not depend on the batch it is in (M = 1, 7, 64, 65, 200: different tiles).
TEST(IntLinearCuda, RowsAreInvariantToBatch) {
  REE_SKIP_WITHOUT_GPU();
  Problem full;
  full.m = 200;
  full.n = 97;
  full.k = 1000;
  full.x_dtype = DType::kBF16;
  full.has_bias = true;
  full.fill(5, true, false);
  std::vector<uint8_t> y_full = full.runCuda();
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
      std::vector<uint8_t> y = part.runCuda();
      // Not accumulating: y_init is overwritten, so only the rows' outputs matter.
      EXPECT_EQ(std::memcmp(y.data(), y_full.data() + first * full.n * 4, rows * full.n * 4), 0)
          << rows << " rows from " << first;
    }
  }
}

TEST(IntLinearCuda, BadArguments) {
  REE_SKIP_WITHOUT_GPU();
  LinearArgs a;
  a.m = 1;
  a.n = 1;
  a.k = 0;
  EXPECT_EQ(cuda::intLinear(a, nullptr), Status::kInvalidArgument);
  a.k = 1;
  a.m = 0;
  int dummy = 0;
  a.w = &dummy;
  EXPECT_EQ(cuda::intLinear(a, nullptr), Status::kSuccess);
}

}  // namespace
}  // namespace ree::repops
