// CUDA repops-3 linear == CPU repops-3 linear, bitwise (the CPU is checked against the spec's
// brute-force form in tests/kernels/cpu/): randomised odd shapes (M up to 300 across the kernel
// switches: decode up to 8 rows, tiled up to 256 for 16-bit w with k a multiple of 8, skinny up to
// 64 otherwise, GEMM beyond; K up to 14336 + odd, odd N, strides, every dtype combination, bias,
// accumulate), every kernel forced on shapes where kAuto would not take it (the tiled kernel's row
// groups, 64-row chunks and K splits), special values (NaN/inf rows, subnormals, huge and tiny
// values together, zeros, the largest digits), K beyond the skinny kernel's limit, the GEMM
// path's row chunks (an lm_head-sized N), row invariance on the GPU (a row alone and inside
// batches of other sizes, on every kernel) and prepared weights == unprepared.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/int_linear_problem.h"
#include "kernels/linear_problem.h"
#include "ree/kernels/int_linear_row.h"

namespace ree::repops {
namespace {

// The CPU test's problem (tests/kernels/int_linear_problem.h) with device copies; the bias and y
// tensors are always filled (the GPU gets valid pointers even without a bias).
struct Problem : test::IntLinearProblem<test::MirroredBuffer> {
  Problem() { draws.y_always = true; }

  std::vector<uint8_t> runCpu() const {
    std::vector<uint8_t> y = y_init.bytes;
    Status s = cpu::intLinearRow(args(x.bytes.data(), w.bytes.data(), bias.bytes.data(), y.data()));
    EXPECT_EQ(s, Status::kSuccess) << lastErrorMessage();
    return y;
  }

  // With `prepared`, w's row exponents come from prepareIntLinearRowWeights.
  std::vector<uint8_t> runCuda(bool prepared = false,
                               cuda::IntLinearRowKernel kernel = cuda::IntLinearRowKernel::kAuto) {
    x.upload();
    w.upload();
    bias.upload();
    uint8_t* y = test::toDevice(y_init.bytes);
    const LinearArgs a = args(x.device, w.device, bias.device, y);
    std::unique_ptr<cuda::IntLinearRowDeviceWeights> weights;
    if (prepared) {
      EXPECT_EQ(cuda::prepareIntLinearRowWeights(a, nullptr, &weights), Status::kSuccess)
          << lastErrorMessage();
    }
    Status s = cuda::intLinearRowWithKernel(a, weights.get(), kernel, nullptr);
    EXPECT_EQ(s, Status::kSuccess) << lastErrorMessage();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> out = test::toHost(y, y_init.bytes.size());
    cudaFree(y);
    return out;
  }
};

void expectSameBits(Problem& p, bool prepared = false,
                    cuda::IntLinearRowKernel kernel = cuda::IntLinearRowKernel::kAuto) {
  std::vector<uint8_t> cpu_y = p.runCpu();
  std::vector<uint8_t> gpu_y = p.runCuda(prepared, kernel);
  long long at = test::firstBitDifference(cpu_y, gpu_y);
  EXPECT_EQ(at, -1) << p.describe() << (prepared ? " prepared" : "") << " kernel "
                    << static_cast<int>(kernel) << " first differing byte " << at;
}

TEST(IntLinearRowCuda, RandomShapesMatchCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(3131);
  test::forEachLinearDtypes([&](DType x_dtype, DType w_dtype, DType y_dtype) {
    for (int rep = 0; rep < 4; ++rep) {
      Problem p;
      p.setDtypes(x_dtype, w_dtype, y_dtype);
      test::drawOddShape(rng, p,
                         rep == 0   ? 300
                         : rep == 1 ? 64
                                    : 20,
                         100, rep == 2 ? 4200 : 900,
                         /*hostile=*/rep != 2, /*non_finite=*/rep == 1);
      expectSameBits(p, /*prepared=*/rep == 3);
      if (HasFailure()) return false;
    }
    return true;
  });
}

// Model-like shapes: K = 14336 + 5 and 4096 + 3, M on both sides of every kernel switch (8, 16,
// 32: the skinny kernel's row groups; 64: skinny / GEMM).
TEST(IntLinearRowCuda, LargeKAndSwitchEdgesMatchCpu) {
  REE_SKIP_WITHOUT_GPU();
  for (int64_t k : {int64_t{4099}, int64_t{14341}}) {
    for (int64_t m : {1, 8, 9, 16, 17, 33, 64, 65, 130}) {
      Problem p;
      p.m = m;
      p.n = 67;
      p.k = k;
      p.x_dtype = DType::kF32;
      p.w_dtype = DType::kBF16;
      p.has_bias = m % 2 == 1;
      p.fill(static_cast<uint64_t>(m * k), false, false);
      expectSameBits(p);
    }
  }
}

// K beyond the skinny kernel's limit (few rows go to the GEMM path), and an N so large that the
// GEMM path splits M into row chunks (its class scratch is bounded).
TEST(IntLinearRowCuda, HugeKAndRowChunksMatchCpu) {
  REE_SKIP_WITHOUT_GPU();
  Problem huge_k;
  huge_k.m = 3;
  huge_k.n = 5;
  huge_k.k = 70001;
  huge_k.w_dtype = DType::kF32;
  huge_k.fill(11, true, false);
  expectSameBits(huge_k);
  Problem wide;
  wide.m = 300;
  wide.n = 120001;
  wide.k = 40;
  wide.x_dtype = DType::kBF16;
  wide.y_dtype = DType::kBF16;
  wide.has_bias = true;
  wide.fill(12, false, false);
  expectSameBits(wide);
}

// NaN/inf rows, subnormals, huge and tiny values, zeros, the largest digits; in the skinny
// kernel (m = 7) and the GEMM path (m = 70: the special rows come first, the rest random).
TEST(IntLinearRowCuda, SpecialValuesMatchCpu) {
  REE_SKIP_WITHOUT_GPU();
  for (int64_t m : {int64_t{7}, int64_t{70}}) {
    for (DType w_dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      Problem p;
      p.m = m;
      p.n = 9;
      p.k = 300;
      p.w_dtype = w_dtype;
      p.has_bias = true;
      p.fill(77, false, false);
      test::setSpecialRows(p);
      for (int i = 0; i < 300; ++i) {
        // A w row of subnormals only (its exponent is far below -107), one of zeros, one huge.
        p.w.set(static_cast<size_t>(5 * 300 + i),
                w_dtype == DType::kF32 ? bitsFloat(1u + 3u * static_cast<uint32_t>(i)) : 0.0f);
        p.w.set(static_cast<size_t>(6 * 300 + i), i % 2 ? -0.0f : 0.0f);
        p.w.set(static_cast<size_t>(7 * 300 + i), w_dtype == DType::kF16 ? 65504.0f : 3e38f);
        p.x.set(static_cast<size_t>(6 * 300 + i), i == 7 ? 1e30f : 1e-30f);
      }
      std::vector<uint8_t> gpu_y = p.runCuda();
      std::vector<uint8_t> cpu_y = p.runCpu();
      EXPECT_EQ(test::firstBitDifference(cpu_y, gpu_y), -1) << p.describe();
      uint32_t first;
      std::memcpy(&first, gpu_y.data(), 4);
      EXPECT_EQ(first, 0x7fc00000u);
    }
  }
}

// The decode kernel (at most 8 rows of x, bf16 w, k a multiple of 8; int_linear_row_decode.cuh):
// last chunks cut short by k, an odd n (a partial tile), special rows, and w rows far below
// 2^-107 (bf16 subnormals and tiny normals: the blocks holding them take the two-factor form).
// K up to 20008 (beyond the short-row quantisation of x), rows of x off 16-byte alignment.
TEST(IntLinearRowCuda, DecodeKernelMatchesCpu) {
  REE_SKIP_WITHOUT_GPU();
  for (int64_t m : {int64_t{1}, int64_t{3}, int64_t{8}}) {
    for (int64_t k : {int64_t{8}, int64_t{296}, int64_t{4104}, int64_t{14344}, int64_t{20008}}) {
      Problem p;
      p.m = m;
      p.n = 35;
      p.k = k;
      p.x_dtype = m == 3 ? DType::kBF16 : DType::kF32;
      p.w_dtype = DType::kBF16;
      p.has_bias = m != 1;
      if (m == 3) p.x_stride = k + 5;  // rows of x off 16-byte alignment (element loads)
      p.fill(static_cast<uint64_t>(m * 1000 + k), /*hostile=*/true, /*non_finite=*/m == 8);
      if (m == 8 && k >= 296) test::setSpecialRows(p);  // its rows are 300 long
      for (int64_t i = 0; i < k; ++i) {
        const float subnormal = bitsFloat(static_cast<uint32_t>(1 + i % 127) << 16);
        p.w.set(static_cast<size_t>(2 * k + i), i % 3 ? subnormal : -subnormal);
        p.w.set(static_cast<size_t>(30 * k + i), std::ldexp(1.0f + (i % 5) / 8.0f, -115));
      }
      expectSameBits(p, /*prepared=*/m != 3);
      if (HasFailure()) return;
    }
  }
}

// The tiled kernel (16-bit w, k a multiple of 8; int_linear_row_tiled.cuh), also where kAuto
// would not take it: both sides of its row groups (8, 16, 32, 64 rows per block) and of its
// 64-row block chunks; K split among the blocks of a cluster (few tiles of w: n = 35, 1000, with
// a last split shorter than the others at k = 4104; three ways at n = 4096) and not split (k =
// 296, or n = 20000: enough tiles to fill the GPU); K ending inside a stage and inside a chunk;
// special rows, w rows far below 2^-107 (the blocks holding them take the two-factor form),
// strides, bias, accumulate.
TEST(IntLinearRowCuda, TiledKernelMatchesCpu) {
  REE_SKIP_WITHOUT_GPU();
  const int64_t shapes[][2] = {{8, 35}, {296, 1000}, {4104, 35}, {4104, 1000}};
  int index = 0;
  for (int64_t m : {1, 8, 9, 16, 17, 40, 64, 65, 130}) {
    for (const auto& shape : shapes) {
      Problem p;
      p.m = m;
      p.k = shape[0];
      p.n = shape[1];
      p.x_dtype = index % 2 ? DType::kBF16 : DType::kF32;
      p.w_dtype = index % 3 == 1 ? DType::kF16 : DType::kBF16;
      p.y_dtype = index % 4 == 3 ? DType::kBF16 : DType::kF32;
      p.w_stride = index % 5 == 2 ? p.k + 8 : 0;
      p.has_bias = index % 2 == 0;
      p.accumulate = index % 7 == 3;
      p.fill(static_cast<uint64_t>(index) + 900, /*hostile=*/true, /*non_finite=*/index % 6 == 1);
      if (m >= 6 && p.k >= 296 && p.w_stride == 0) test::setSpecialRows(p);
      if (p.w_dtype == DType::kBF16 && p.n > 30 && p.w_stride == 0) {
        for (int64_t i = 0; i < p.k; ++i) {
          const float subnormal = bitsFloat(static_cast<uint32_t>(1 + i % 127) << 16);
          p.w.set(static_cast<size_t>(20 * p.k + i), i % 3 ? subnormal : -subnormal);
          p.w.set(static_cast<size_t>(30 * p.k + i), std::ldexp(1.0f + (i % 5) / 8.0f, -115));
        }
      }
      expectSameBits(p, /*prepared=*/index % 2 == 1, cuda::IntLinearRowKernel::kTiled);
      ++index;
      if (HasFailure()) return;
    }
  }
  // {m, k, n}: 64 x 4096 at k = 4360 splits K three ways on an H100 (64 clusters of three fit
  // the GPU at once, 64 of four do not), the last split shorter.
  const int64_t wide_shapes[][3] = {{17, 296, 20000}, {200, 4104, 20000}, {64, 4360, 4096}};
  for (const auto& shape : wide_shapes) {
    Problem wide;
    wide.m = shape[0];
    wide.k = shape[1];
    wide.n = shape[2];
    wide.w_dtype = DType::kBF16;
    wide.has_bias = true;
    wide.fill(static_cast<uint64_t>(shape[0]) + 950, false, false);
    expectSameBits(wide, /*prepared=*/true, cuda::IntLinearRowKernel::kTiled);
  }
}

// Every kernel that can serve a problem gives the same bits (kUnsupported where it cannot).
TEST(IntLinearRowCuda, EveryKernelGivesTheSameBits) {
  REE_SKIP_WITHOUT_GPU();
  for (int64_t m : {int64_t{5}, int64_t{33}, int64_t{64}, int64_t{100}}) {
    Problem p;
    p.m = m;
    p.n = 131;
    p.k = 1000;
    p.w_dtype = DType::kBF16;
    p.has_bias = true;
    p.fill(static_cast<uint64_t>(m) + 990, true, false);
    const std::vector<uint8_t> cpu_y = p.runCpu();
    for (auto kernel : {cuda::IntLinearRowKernel::kDecode, cuda::IntLinearRowKernel::kSkinny,
                        cuda::IntLinearRowKernel::kTiled, cuda::IntLinearRowKernel::kGemm}) {
      const bool serves = kernel == cuda::IntLinearRowKernel::kDecode   ? m <= 8
                          : kernel == cuda::IntLinearRowKernel::kSkinny ? m <= 64
                                                                        : true;
      if (!serves) {
        LinearArgs a = p.args(p.x.bytes.data(), p.w.bytes.data(), nullptr, p.y_init.bytes.data());
        EXPECT_EQ(cuda::intLinearRowWithKernel(a, nullptr, kernel, nullptr), Status::kUnsupported);
        continue;
      }
      EXPECT_EQ(test::firstBitDifference(cpu_y, p.runCuda(false, kernel)), -1)
          << p.describe() << " kernel " << static_cast<int>(kernel);
    }
  }
}

// A row's bits do not depend on the batch it is in: under kAuto (M = 1, 7: decode kernel; 64,
// 65, 200: tiled), and with the skinny kernel (M <= 64) and the GEMM path (beyond) forced.
TEST(IntLinearRowCuda, RowsAreInvariantToBatch) {
  REE_SKIP_WITHOUT_GPU();
  test::expectRowsInvariantToBatch<Problem>(
      [](Problem& p) { return p.runCuda(/*prepared=*/p.m == 7); });
  test::expectRowsInvariantToBatch<Problem>([](Problem& p) {
    return p.runCuda(/*prepared=*/false, p.m <= 64 ? cuda::IntLinearRowKernel::kSkinny
                                                   : cuda::IntLinearRowKernel::kGemm);
  });
}

// Prepared weights give the bits of unprepared ones on both paths and for every w dtype.
TEST(IntLinearRowCuda, PreparedMatchesUnprepared) {
  REE_SKIP_WITHOUT_GPU();
  for (DType w_dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t m : {int64_t{1}, int64_t{40}, int64_t{100}}) {
      Problem p;
      p.m = m;
      p.n = 33;
      p.k = 517;
      p.w_dtype = w_dtype;
      p.w_stride = 519;
      p.fill(static_cast<uint64_t>(m) + 100, true, false);
      std::vector<uint8_t> plain = p.runCuda(false);
      std::vector<uint8_t> prepared = p.runCuda(true);
      EXPECT_EQ(test::firstBitDifference(plain, prepared), -1) << p.describe();
    }
  }
}

TEST(IntLinearRowCuda, BadArguments) {
  REE_SKIP_WITHOUT_GPU();
  LinearArgs a;
  a.m = 1;
  a.n = 1;
  a.k = 0;
  EXPECT_EQ(cuda::intLinearRow(a, nullptr), Status::kInvalidArgument);
  a.k = int_linear_row::kMaxK + 1;
  EXPECT_EQ(cuda::intLinearRow(a, nullptr), Status::kInvalidArgument);
  a.k = 1;
  a.m = 0;
  int dummy = 0;
  a.w = &dummy;
  EXPECT_EQ(cuda::intLinearRow(a, nullptr), Status::kSuccess);
  std::unique_ptr<cuda::IntLinearRowDeviceWeights> weights;
  a.n = 2;
  EXPECT_EQ(cuda::prepareIntLinearRowWeights(a, nullptr, nullptr), Status::kInvalidArgument);
  a.k = int_linear_row::kMaxK + 1;
  EXPECT_EQ(cuda::prepareIntLinearRowWeights(a, nullptr, &weights), Status::kInvalidArgument);
}

}  // namespace
}  // namespace ree::repops
