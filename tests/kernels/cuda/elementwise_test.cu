// Element-wise RepOps on the GPU (elementwise.h): repops::cuda::binary / simpleUnary / where give
// the CPU's bits on random and special inputs (NaN of any payload, +-0, +-inf, subnormals), odd
// sizes; gather copies the same elements (1, 4 and 8 bytes, with padding).
#include <cuda_runtime.h>

#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "ree/kernels/elementwise.h"

namespace ree {
namespace {

std::vector<float> specialMix(int64_t n, uint64_t seed) {
  std::vector<float> xs(n);
  std::mt19937_64 rng(seed);
  const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                               0xffc00001u, 0x7f800001u, 0x00000001u, 0x807fffffu, 0x3f800000u,
                               0xbf800000u, 0x40000000u, 0x3f000000u};
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b = static_cast<uint32_t>(rng());
    if (i % 5 == 0) b = specials[rng() % (sizeof(specials) / sizeof(specials[0]))];
    if (i % 5 == 1) b = (b & 0x807fffffu) | ((120u + static_cast<uint32_t>(rng() % 16)) << 23);
    xs[i] = bitsFloat(b);
  }
  return xs;
}

TEST(ElementwiseCuda, MatchesCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  for (int64_t n : {int64_t{1}, int64_t{33}, int64_t{4099}, int64_t{1000003}}) {
    std::vector<float> a = specialMix(n, 2 * n), b = specialMix(n, 2 * n + 1);
    std::vector<uint8_t> condition(n);
    for (int64_t i = 0; i < n; ++i)
      condition[i] = static_cast<uint8_t>((i * 7) % 3 == 0);
    float* d_a = test::toDevice(a);
    float* d_b = test::toDevice(b);
    uint8_t* d_c = test::toDevice(condition);
    float* d_out = nullptr;
    REE_CUDA_OK(cudaMalloc(&d_out, n * sizeof(float)));
    std::vector<float> cpu(n);
    for (int op = 0; op < kBinaryOpCount; ++op) {
      auto bop = static_cast<BinaryOp>(op);
      ASSERT_EQ(repops::cpu::binary(bop, a.data(), b.data(), cpu.data(), n), Status::kSuccess);
      ASSERT_EQ(repops::cuda::binary(bop, d_a, d_b, d_out, n, nullptr), Status::kSuccess);
      std::vector<float> gpu = test::toHost(d_out, n);
      long long diff = test::firstBitDifference(cpu, gpu);
      EXPECT_EQ(diff, -1) << binaryOpName(bop) << " n=" << n;
    }
    for (int op = 0; op < kSimpleUnaryOpCount; ++op) {
      auto uop = static_cast<SimpleUnaryOp>(op);
      ASSERT_EQ(repops::cpu::simpleUnary(uop, a.data(), cpu.data(), n), Status::kSuccess);
      ASSERT_EQ(repops::cuda::simpleUnary(uop, d_a, d_out, n, nullptr), Status::kSuccess);
      std::vector<float> gpu = test::toHost(d_out, n);
      EXPECT_EQ(test::firstBitDifference(cpu, gpu), -1) << simpleUnaryOpName(uop) << " n=" << n;
    }
    ASSERT_EQ(repops::cpu::where(condition.data(), a.data(), b.data(), cpu.data(), n),
              Status::kSuccess);
    ASSERT_EQ(repops::cuda::where(d_c, d_a, d_b, d_out, n, nullptr), Status::kSuccess);
    EXPECT_EQ(test::firstBitDifference(cpu, test::toHost(d_out, n)), -1) << "where n=" << n;
    REE_CUDA_OK(cudaFree(d_a));
    REE_CUDA_OK(cudaFree(d_b));
    REE_CUDA_OK(cudaFree(d_c));
    REE_CUDA_OK(cudaFree(d_out));
  }
}

TEST(ElementwiseCuda, GatherMatchesCpu) {
  REE_SKIP_WITHOUT_GPU();
  const int64_t n = 100003, source = 4099;
  std::mt19937_64 rng(5);
  std::vector<int64_t> index(n);
  for (int64_t i = 0; i < n; ++i)
    index[i] = i % 11 == 0 ? -1 : static_cast<int64_t>(rng() % source);
  std::vector<uint64_t> in(source);
  for (uint64_t& v : in)
    v = rng();
  uint64_t* d_in = test::toDevice(in);
  int64_t* d_index = test::toDevice(index);
  uint64_t* d_out = nullptr;
  REE_CUDA_OK(cudaMalloc(&d_out, n * sizeof(uint64_t)));
  for (int bytes : {1, 4, 8}) {
    std::vector<uint64_t> cpu(n, 0), gpu(n, 0);
    ASSERT_EQ(repops::cpu::gather(bytes, in.data(), index.data(), cpu.data(), n, 0xff800000u),
              Status::kSuccess);
    REE_CUDA_OK(cudaMemset(d_out, 0, n * sizeof(uint64_t)));
    ASSERT_EQ(repops::cuda::gather(bytes, d_in, d_index, d_out, n, 0xff800000u, nullptr),
              Status::kSuccess);
    gpu = test::toHost(d_out, n);
    EXPECT_EQ(test::firstBitDifference(cpu, gpu), -1) << bytes << "-byte elements";
  }
  REE_CUDA_OK(cudaFree(d_in));
  REE_CUDA_OK(cudaFree(d_index));
  REE_CUDA_OK(cudaFree(d_out));
}

}  // namespace
}  // namespace ree
