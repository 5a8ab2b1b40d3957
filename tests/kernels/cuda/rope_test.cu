// CUDA RoPE == CPU RoPE, bit for bit, on random shapes, layouts, dtypes and frequency tables.
#include <cuda_runtime.h>

#include <vector>

#include "ree/kernels/rope.h"
#include "test_util.h"

namespace ree {
namespace {

template <typename T>
T* toDevice(const std::vector<T>& host) {
  T* device = nullptr;
  EXPECT_EQ(cudaMalloc(&device, host.size() * sizeof(T) + 1), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return device;
}

template <typename T>
std::vector<T> toHost(const T* device, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

TEST(RopeCuda, InvFreqMatchesCpuBitwise) {
  REE_SKIP_WITHOUT_GPU();
  RopeLlama3Scaling llama31{8.0, 1.0, 4.0, 8192}, llama32{32.0, 1.0, 4.0, 8192};
  for (float base : {10000.0f, 500000.0f, 1000000.0f, 1234.5f}) {
    for (int dim : {2, 32, 64, 96, 128, 256, 1024}) {
      for (const RopeLlama3Scaling* scaling :
           {(const RopeLlama3Scaling*)nullptr, (const RopeLlama3Scaling*)&llama31,
            (const RopeLlama3Scaling*)&llama32}) {
        std::vector<float> cpu(dim / 2);
        ASSERT_EQ(repops::cpu::ropeInvFreq(base, dim, scaling, cpu.data()), Status::kSuccess);
        float* device = nullptr;
        ASSERT_EQ(cudaMalloc(&device, dim / 2 * sizeof(float)), cudaSuccess);
        ASSERT_EQ(repops::cuda::ropeInvFreq(base, dim, scaling, device, nullptr), Status::kSuccess);
        EXPECT_EQ(test::firstBitDifference(toHost(device, dim / 2), cpu), -1)
            << "base " << base << " dim " << dim;
        cudaFree(device);
      }
    }
  }
}

template <typename T>
void checkRope(DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t tokens = 1 + rng() % 300;
  const int heads = 1 + rng() % 9;
  const int head_dim = 2 * (1 + rng() % 80);
  const int rotary_dim = 2 * (1 + rng() % (head_dim / 2));
  const int64_t token_stride = heads * head_dim + rng() % 5;
  const RopeLayout layout = (rng() & 1) ? RopeLayout::kHalfSplit : RopeLayout::kInterleaved;
  std::vector<int32_t> positions(tokens);
  for (auto& p : positions)
    p = static_cast<int32_t>(rng() % 1000000) - (rng() % 8 == 0 ? 500 : 0);
  std::vector<float> inv(rotary_dim / 2);
  RopeLlama3Scaling scaling;
  ASSERT_EQ(
      repops::cpu::ropeInvFreq(500000.0f, rotary_dim, (rng() & 1) ? &scaling : nullptr, inv.data()),
      Status::kSuccess);
  std::vector<T> x = test::randomValues<T>(tokens * token_stride, seed + 1, 3.0f);
  T* dx = toDevice(x);
  int32_t* dpos = toDevice(positions);
  float* dinv = toDevice(inv);
  ASSERT_EQ(repops::cpu::rope(dtype, x.data(), tokens, heads, head_dim, token_stride,
                              positions.data(), inv.data(), rotary_dim, layout),
            Status::kSuccess);
  ASSERT_EQ(repops::cuda::rope(dtype, dx, tokens, heads, head_dim, token_stride, dpos, dinv,
                               rotary_dim, layout, nullptr),
            Status::kSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(test::firstBitDifference(toHost(dx, x.size()), x), -1)
      << dtypeName(dtype) << " tokens " << tokens << " heads " << heads << " head_dim " << head_dim
      << " rotary " << rotary_dim << " layout " << static_cast<int>(layout);
  cudaFree(dx);
  cudaFree(dpos);
  cudaFree(dinv);
}

TEST(RopeCuda, MatchesCpuBitwiseOnRandomShapes) {
  REE_SKIP_WITHOUT_GPU();
  for (uint64_t seed = 0; seed < 40; ++seed) {
    checkRope<float>(DType::kF32, seed);
    checkRope<bf16_t>(DType::kBF16, seed + 1000);
    checkRope<f16_t>(DType::kF16, seed + 2000);
  }
}

}  // namespace
}  // namespace ree
