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
#include "kernels/int_linear_problem.h"
#include "kernels/linear_problem.h"
#include "ree/kernels/int_linear.h"

namespace ree::repops {
namespace {

// The CPU test's problem (tests/kernels/int_linear_problem.h) with device copies; the bias and y
// tensors are always filled (the GPU gets valid pointers even without a bias).
struct Problem : test::IntLinearProblem<test::MirroredBuffer> {
  Problem() { draws.y_always = true; }

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
      test::drawOddShape(rng, p, rep == 0 ? 300 : 20, 100, rep == 2 ? 4200 : 900,
                         /*hostile=*/rep != 2, /*non_finite=*/rep == 1);
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
  test::setSpecialRows(p);
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
  test::expectRowsInvariantToBatch<Problem>([](Problem& p) { return p.runCuda(); });
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
