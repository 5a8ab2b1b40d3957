// CUDA linear over GGUF blocks == CPU (quant_linear.h) == dequantise + repops-1 linear, bitwise:
// every block type, odd K multiples of the block (one and two 4096-wide GEMV windows, partial
// chunks), M = 1..70 across the GEMV/GEMM switch at 64, every kernel (auto, GEMV forced at any
// M, dequantise-then-GEMM forced at any M), padded and misaligned weight rows (the byte-copy
// path), bf16 x and y, bias, accumulate. Rows of weights and x whose bytes are multiples of 16
// take the lane-per-feature GEMV (quant_linear_lanes.cuh): its cases use such K (for Q4_1 and
// Q5_1 also K that are not multiples of 256 or 128: a partial stage or chunk), odd N, strided x,
// and check that a row of a batch has the bits of the row alone, and blocks with special scales
// (its exact fma dequantisation of finite scales, quant_blocks.h's arithmetic for the others),
// Q6_K's extreme finite scales, and grids large enough for its 4- and 2-warp blocks and rings.
#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/quant_linear_problem.h"
#include "ree/kernels/quant_linear.h"

namespace ree::repops {
namespace {

using cuda::LinearKernel;

// y from the GPU; w_offset bytes of shift in the weights' device buffer (misaligned rows).
std::vector<unsigned char> runCuda(const test::QuantProblem& p, LinearKernel kernel,
                                   size_t w_offset = 0) {
  test::DeviceBuffer w(p.w.size() + w_offset, 16);
  EXPECT_EQ(cudaMemcpy(w.at(w_offset), p.w.data(), p.w.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  test::DeviceBuffer x(p.x), bias(p.bias_bytes), y(p.y_init);
  Status s =
      cuda::quantLinearWithKernel(p.args(w.at(w_offset), x.ptr, bias.ptr, y.ptr), kernel, nullptr);
  EXPECT_EQ(s, Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return y.download(p.y_init.size());
}

std::vector<unsigned char> runCpu(const test::QuantProblem& p) {
  std::vector<unsigned char> y = p.y_init;
  Status s = cpu::quantLinear(p.args(p.w.data(), p.x.data(), p.bias_bytes.data(), y.data()));
  EXPECT_EQ(s, Status::kSuccess) << lastErrorMessage();
  return y;
}

void expectAllKernelsMatch(const test::QuantProblem& p, size_t w_offset = 0) {
  const std::vector<unsigned char> expected = p.reference();
  ASSERT_FALSE(expected.empty()) << lastErrorMessage();
  EXPECT_EQ(test::firstBitDifference(expected, runCpu(p)), -1) << "cpu " << p.describe();
  const LinearKernel kernels[] = {LinearKernel::kAuto, LinearKernel::kGemv, LinearKernel::kGemm};
  const char* names[] = {"auto", "gemv", "gemm"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(test::firstBitDifference(expected, runCuda(p, kernels[i], w_offset)), -1)
        << names[i] << " " << p.describe() << " w_offset=" << w_offset;
  }
}

std::vector<int64_t> oddKs(QuantType type) {
  const int64_t b = quantBlockElems(type);
  return b == 32 ? std::vector<int64_t>{32, 96, 544, 4128} : std::vector<int64_t>{256, 768, 4352};
}

TEST(QuantLinearCuda, EveryTypeAndRowCountMatchesCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(2626);
  for (QuantType type : test::kAllQuantTypes) {
    for (int64_t k : oddKs(type)) {
      for (int64_t m : {1, 2, 3, 4, 5, 9, 16, 17, 63, 64, 65, 70}) {
        test::QuantProblem p;
        p.type = type;
        p.k = k;
        p.m = m;
        p.n = 1 + 2 * static_cast<int64_t>(rng() % 30);
        p.bias = rng() % 2;
        p.accumulate = rng() % 4 == 0;
        p.x_dtype = rng() % 3 == 0 ? DType::kBF16 : DType::kF32;
        p.y_dtype = rng() % 3 == 0 ? DType::kBF16 : DType::kF32;
        p.fill(rng());
        expectAllKernelsMatch(p);
        if (HasFailure()) return;
      }
    }
  }
}

// The smallest K (a multiple of the block) whose rows are a multiple of 16 bytes: the lane GEMV.
int64_t alignedK(QuantType type) {
  int64_t k = quantBlockElems(type);
  while (k / quantBlockElems(type) * quantBlockBytes(type) % 16 != 0)
    k += quantBlockElems(type);
  return k;
}

// K for the lane GEMV: one stage or less, three, and seventeen units (an odd number of 256-wide
// stages over the warps; a partial last stage where the unit is 64 or 128).
std::vector<int64_t> alignedKs(QuantType type) {
  const int64_t unit = alignedK(type);
  return {unit, 3 * unit, 17 * unit};
}

TEST(QuantLinearCuda, LaneGemvEveryTypeAndRowCountMatchesCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(2828);
  for (QuantType type : test::kAllQuantTypes) {
    for (int64_t k : alignedKs(type)) {
      for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 70}) {
        test::QuantProblem p;
        p.type = type;
        p.k = k;
        p.m = m;
        p.n = 1 + 2 * static_cast<int64_t>(rng() % 40);  // odd: 1..79, one to three blocks of 32
        p.x_pad = rng() % 2 ? 8 : 0;                     // strided x rows, still 16-byte aligned
        p.y_pad = rng() % 2;
        p.bias = rng() % 2;
        p.accumulate = rng() % 4 == 0;
        p.x_dtype = rng() % 2 ? DType::kBF16 : DType::kF32;
        p.y_dtype = rng() % 3 == 0 ? DType::kBF16 : DType::kF32;
        p.fill(rng());
        expectAllKernelsMatch(p);
        if (HasFailure()) return;
      }
    }
  }
}

// Row r of a batch of M rows of x has the bits of the same row computed alone (M = 1): the
// lane GEMV's row blocks and the kernel choice by M change nothing.
TEST(QuantLinearCuda, BatchRowsEqualTheRowAlone) {
  REE_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(2929);
  for (QuantType type : test::kAllQuantTypes) {
    for (int64_t m : {5, 37, 64}) {
      test::QuantProblem p;
      p.type = type;
      p.k = 3 * alignedK(type);
      p.m = m;
      p.n = 45;
      p.x_pad = 8;
      p.bias = true;
      p.x_dtype = rng() % 2 ? DType::kBF16 : DType::kF32;
      p.fill(rng());
      const std::vector<unsigned char> batch = runCuda(p, LinearKernel::kAuto);
      const size_t x_row = static_cast<size_t>(p.xs() * dtypeSize(p.x_dtype));
      const size_t y_row = static_cast<size_t>(p.ys() * dtypeSize(p.y_dtype));
      for (int64_t r : {int64_t{0}, m / 2, m - 1}) {
        test::QuantProblem alone = p;
        alone.m = 1;
        alone.x.assign(p.x.begin() + r * x_row, p.x.begin() + (r + 1) * x_row);
        alone.y_init.assign(p.y_init.begin() + r * y_row, p.y_init.begin() + (r + 1) * y_row);
        const std::vector<unsigned char> row(batch.begin() + r * y_row,
                                             batch.begin() + (r + 1) * y_row);
        EXPECT_EQ(test::firstBitDifference(row, runCuda(alone, LinearKernel::kAuto)), -1)
            << p.describe() << " row " << r;
      }
      if (HasFailure()) return;
    }
  }
}

// Bits equal, or both NaN (NaN payloads of CPU and GPU arithmetic differ).
long long firstDifferenceBesidesNaN(const std::vector<unsigned char>& a,
                                    const std::vector<unsigned char>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i + 4 <= a.size(); i += 4) {
    float fa = 0.0f, fb = 0.0f;
    std::memcpy(&fa, &a[i], 4);
    std::memcpy(&fb, &b[i], 4);
    if (std::memcmp(&fa, &fb, 4) != 0 && !(fa != fa && fb != fb)) return static_cast<long long>(i);
  }
  return -1;
}

// Blocks whose binary16 scale is special: +-inf, NaN, +-0, the smallest subnormal, the largest
// finite, with codes and sub-scales that give non-zero products (inf, not NaN, where the spec
// multiplies). The lane GEMV computes finite scales' weights with one fma from a magic-number
// float (quant_linear_words.cuh: exact, zero signs aside) and the others by quant_blocks.h: it
// matches the CPU bit for bit (outputs that are NaN on both sides aside).
TEST(QuantLinearCuda, LaneGemvSpecialScalesMatchCpu) {
  REE_SKIP_WITHOUT_GPU();
  const uint16_t specials[] = {0x7C00, 0xFC00, 0x7E00, 0x0000, 0x8000, 0x0001, 0x8001, 0x7BFF};
  std::mt19937_64 rng(3030);
  for (QuantType type : test::kAllQuantTypes) {
    for (int64_t m : {1, 5}) {
      test::QuantProblem p;
      p.type = type;
      p.k = 3 * alignedK(type);
      p.m = m;
      p.n = 40;
      p.x_dtype = DType::kF32;
      p.y_dtype = DType::kF32;
      p.fill(rng());
      for (size_t i = 3; i < p.x.size(); i += 4)
        p.x[i] &= 0x7F;  // x > 0: a row with an infinite weight sums to +-inf, not NaN
      const int block_bytes = quantBlockBytes(type);
      const int64_t blocks = p.k / quantBlockElems(type);
      for (int64_t row = 0; row < p.n; row += 3) {
        const int64_t b = static_cast<int64_t>(rng() % blocks);
        unsigned char* block = p.w.data() + row * p.wRowBytes() + b * block_bytes;
        const std::vector<int> fields = test::halfFields(type);
        for (int i = 0; i < block_bytes; ++i)
          block[i] = 0x11;  // codes and sub-scales: non-zero products
        const uint16_t h = specials[(row / 3) % 8];
        block[fields[0]] = h & 0xFF, block[fields[0] + 1] = h >> 8;
        if (fields.size() > 1) block[fields[1]] = 0x00, block[fields[1] + 1] = 0x3C;  // 1.0
        if (row % 2 == 1 && fields.size() > 1) {  // a special second scale (min) instead
          block[fields[0]] = 0x00, block[fields[0] + 1] = 0x3C;
          block[fields[1]] = h & 0xFF, block[fields[1] + 1] = h >> 8;
        }
      }
      const std::vector<unsigned char> expected = runCpu(p);
      for (LinearKernel kernel : {LinearKernel::kAuto, LinearKernel::kGemv}) {
        EXPECT_EQ(firstDifferenceBesidesNaN(expected, runCuda(p, kernel)), -1)
            << p.describe() << " kernel " << static_cast<int>(kernel);
      }
      if (HasFailure()) return;
    }
  }
}

// Q6_K's word dequantisation (one fma from exact constants, quant_linear_words.cuh) at the
// extremes of its exact range: d the largest, the smallest subnormal, +-0 or 1 with either sign,
// int8 sub-scales -128, 127, -1 and 0, random codes (c - 32 from -32 to 31); both stage parities
// (super-blocks at byte 0 and 2 of a word), odd N, M past a row block of 8. All finite: bitwise.
TEST(QuantLinearCuda, LaneGemvQ6_KExtremeScalesMatchCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  const uint16_t ds[] = {0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x3C00, 0xBC00, 0x0000, 0x8000};
  const unsigned char scales[] = {0x80, 0x7F, 0xFF, 0x00};
  std::mt19937_64 rng(3131);
  for (int64_t m : {1, 3, 9, 17}) {
    test::QuantProblem p;
    p.type = QuantType::kQ6_K;
    p.k = 3 * alignedK(QuantType::kQ6_K);
    p.m = m;
    p.n = 41;
    p.x_dtype = m % 2 ? DType::kF32 : DType::kBF16;
    p.fill(rng());
    for (int64_t row = 0; row < p.n; ++row) {
      for (int64_t b = 0; b < p.k / 256; ++b) {
        unsigned char* block = p.w.data() + row * p.wRowBytes() + b * 210;
        for (int j = 0; j < 16; ++j)
          block[192 + j] = scales[rng() % 4];
        const uint16_t d = ds[rng() % 8];
        block[208] = d & 0xFF, block[209] = d >> 8;
      }
    }
    expectAllKernelsMatch(p);
    if (HasFailure()) return;
  }
}

// Grids of more than two blocks per SM: the lane GEMV's blocks of 4 or 2 warps with rings of 3 or
// 2 stages, whichever keeps the most warps on an SM for the type (quant_linear.cu), every type.
TEST(QuantLinearCuda, LaneGemvLargeGridsMatchCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  int device = 0, sms = 0;
  REE_CUDA_OK(cudaGetDevice(&device));
  REE_CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  std::mt19937_64 rng(3232);
  for (QuantType type : test::kAllQuantTypes) {
    for (int64_t m : {1, 2, 5}) {
      test::QuantProblem p;
      p.type = type;
      p.k = 2048;  // 8 stages; rows a multiple of 16 bytes for every type
      p.m = m;
      p.n = 64 * static_cast<int64_t>(sms) + 7;  // 2 SMs' worth of 32-feature blocks, and a part
      p.x_dtype = rng() % 2 ? DType::kBF16 : DType::kF32;
      p.fill(rng());
      EXPECT_EQ(test::firstBitDifference(runCpu(p), runCuda(p, LinearKernel::kAuto)), -1)
          << p.describe();
      if (HasFailure()) return;
    }
  }
}

TEST(QuantLinearCuda, PaddedAndMisalignedRowsMatchCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(2727);
  for (QuantType type : test::kAllQuantTypes) {
    test::QuantProblem p;
    p.type = type;
    p.k = quantBlockElems(type) == 32 ? 4128 : 4352;
    p.m = 1 + static_cast<int64_t>(rng() % 6);
    p.n = 37;
    p.w_pad = 2;  // rows 2 bytes longer: not 16-byte aligned
    p.x_pad = 1;
    p.y_pad = 3;
    p.bias = true;
    p.fill(rng());
    expectAllKernelsMatch(p);
    expectAllKernelsMatch(p, /*w_offset=*/2);
    p.w_pad = 16;  // aligned rows, misaligned base
    p.fill(rng());
    expectAllKernelsMatch(p);
    expectAllKernelsMatch(p, /*w_offset=*/6);
    if (HasFailure()) return;
  }
}

TEST(QuantLinearCuda, LargeShapesMatchCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  // A decode-sized layer: many blocks of the grid, 3.5 windows of K, both row kernels.
  for (QuantType type :
       {QuantType::kQ4_0, QuantType::kQ4_1, QuantType::kQ4_K, QuantType::kQ6_K, QuantType::kQ8_0}) {
    for (int64_t m : {1, 4, 16, 64}) {
      test::QuantProblem p;
      p.type = type;
      p.k = 14336;
      p.n = 515;
      p.m = m;
      p.fill(99 + m);
      const std::vector<unsigned char> expected = runCpu(p);
      EXPECT_EQ(test::firstBitDifference(expected, runCuda(p, LinearKernel::kAuto)), -1)
          << p.describe();
    }
  }
}

TEST(QuantEmbeddingCuda, RowsMatchCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(32);
  for (QuantType type : test::kAllQuantTypes) {
    test::QuantProblem p;
    p.type = type;
    p.k = quantBlockElems(type) * 5;
    p.n = 11;
    p.w_pad = 2;
    p.fill(rng());
    const std::vector<int32_t> ids = {10, 0, 4, 4, 7};
    QuantEmbeddingArgs a;
    a.type = type;
    a.rows = p.n, a.k = p.k, a.row_bytes = p.wRowBytes();
    a.ids = ids.data();
    a.count = static_cast<int64_t>(ids.size());
    std::vector<float> expected(ids.size() * p.k);
    a.table = p.w.data();
    a.out = expected.data();
    ASSERT_EQ(cpu::quantEmbedding(a), Status::kSuccess) << lastErrorMessage();
    test::DeviceBuffer table(p.w), device_ids(ids.size() * 4), out(expected.size() * 4);
    REE_CUDA_OK(cudaMemcpy(device_ids.ptr, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
    a.table = table.ptr;
    a.out = static_cast<float*>(out.ptr);
    ASSERT_EQ(cuda::quantEmbedding(a, static_cast<const int32_t*>(device_ids.ptr), nullptr),
              Status::kSuccess)
        << lastErrorMessage();
    REE_CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> got(expected.size());
    REE_CUDA_OK(cudaMemcpy(got.data(), out.ptr, got.size() * 4, cudaMemcpyDeviceToHost));
    EXPECT_EQ(test::firstBitDifference(expected, got), -1) << quantTypeName(type);
  }
}

}  // namespace
}  // namespace ree::repops
