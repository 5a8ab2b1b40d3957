// CUDA RoPE == CPU RoPE, bit for bit, on random shapes, layouts, dtypes and frequency tables.
#include <cuda_runtime.h>

#include <vector>

#include "cuda_test_util.h"
#include "ree/kernels/rope.h"

namespace ree {
namespace {

using test::dtypeOf;
using test::toHost;

// One byte of slack after the data, as this test always allocated (toDevice gives 16 by default).
template <typename T>
T* toDevice(const std::vector<T>& host) {
  return test::toDevice(host, /*slack_bytes=*/1);
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

// Rotates `tokens` rows of x (starting `offset` elements into the allocation, which moves the
// kernel off its 16-byte path when offset * sizeof(T) is not a multiple of 16) on the CPU and
// the GPU and compares every element, the untouched ones included.
template <typename T>
void checkRopeShape(int64_t tokens, int heads, int head_dim, int rotary_dim, int64_t token_stride,
                    RopeLayout layout, bool llama3, int64_t offset, uint64_t seed) {
  const DType dtype = dtypeOf<T>();
  std::mt19937_64 rng(seed);
  std::vector<int32_t> positions(tokens);
  for (auto& p : positions)
    p = static_cast<int32_t>(rng() % 1000000) - (rng() % 8 == 0 ? 500 : 0);
  std::vector<float> inv(rotary_dim / 2);
  RopeLlama3Scaling scaling;
  ASSERT_EQ(
      repops::cpu::ropeInvFreq(500000.0f, rotary_dim, llama3 ? &scaling : nullptr, inv.data()),
      Status::kSuccess);
  std::vector<T> x = test::randomValues<T>(offset + tokens * token_stride, seed + 1, 3.0f);
  // A few NaNs of both signs and infinities: NaN results must come out canonical on both sides.
  const float specials[] = {bitsFloat(0xffc01234u), bitsFloat(0x7fa00001u), INFINITY, -INFINITY};
  for (size_t i = offset + 5; i < x.size(); i += 211)
    x[i] = storeAs<T>(specials[(i / 211) % 4]);
  T* dx = toDevice(x);
  int32_t* dpos = toDevice(positions);
  float* dinv = toDevice(inv);
  ASSERT_EQ(repops::cpu::rope(dtype, x.data() + offset, tokens, heads, head_dim, token_stride,
                              positions.data(), inv.data(), rotary_dim, layout),
            Status::kSuccess);
  ASSERT_EQ(repops::cuda::rope(dtype, dx + offset, tokens, heads, head_dim, token_stride, dpos,
                               dinv, rotary_dim, layout, nullptr),
            Status::kSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(test::firstBitDifference(toHost(dx, x.size()), x), -1)
      << dtypeName(dtype) << " tokens " << tokens << " heads " << heads << " head_dim " << head_dim
      << " rotary " << rotary_dim << " stride " << token_stride << " offset " << offset
      << " layout " << static_cast<int>(layout);
  cudaFree(dx);
  cudaFree(dpos);
  cudaFree(dinv);
}

template <typename T>
void checkRope(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t tokens = 1 + rng() % 300;
  const int heads = 1 + rng() % 9;
  const int head_dim = 2 * (1 + rng() % 80);
  const int rotary_dim = 2 * (1 + rng() % (head_dim / 2));
  const int64_t token_stride = heads * head_dim + rng() % 5;
  const RopeLayout layout = (rng() & 1) ? RopeLayout::kHalfSplit : RopeLayout::kInterleaved;
  const bool llama3 = rng() & 1;
  checkRopeShape<T>(tokens, heads, head_dim, rotary_dim, token_stride, layout, llama3, 0, seed);
}

TEST(RopeCuda, MatchesCpuBitwiseOnRandomShapes) {
  REE_SKIP_WITHOUT_GPU();
  for (uint64_t seed = 0; seed < 40; ++seed) {
    checkRope<float>(seed);
    checkRope<bf16_t>(seed + 1000);
    checkRope<f16_t>(seed + 2000);
  }
}

// Every launch path: 16-byte items (half-split and interleaved) and the scalar fallback, decode
// (< 64 tokens: a token split over blocks) and prefill (whole tokens, several per block when a
// token is short), partial rotary, padded rows, unaligned x, long heads split over blocks.
template <typename T>
void checkRopePaths(uint64_t seed) {
  constexpr int64_t kVector = 16 / sizeof(T);
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    for (int64_t tokens : {1, 3, 63, 64, 257}) {
      // Llama 3 query and key shapes: 16-byte items.
      checkRopeShape<T>(tokens, 32, 128, 128, 32 * 128, layout, true, 0, seed++);
      checkRopeShape<T>(tokens, 8, 128, 128, 8 * 128, layout, true, 0, seed++);
      // Key slice of a fused qkv row (stride > heads * head_dim, still 16-byte aligned).
      checkRopeShape<T>(tokens, 8, 128, 128, 48 * 128, layout, false, 32 * 128, seed++);
      // Partial rotary (the second half of a half-split head starts 16-byte aligned).
      checkRopeShape<T>(tokens, 4, 80, 32, 4 * 80 + kVector, layout, false, 0, seed++);
      checkRopeShape<T>(tokens, 2, 128, 64, 2 * 128, layout, false, 0, seed++);
      // Scalar fallbacks: x not 16-byte aligned, odd padding, rotary halves off the vector grid.
      checkRopeShape<T>(tokens, 32, 128, 128, 32 * 128, layout, true, 1, seed++);
      checkRopeShape<T>(tokens, 3, 64, 64, 3 * 64 + 2, layout, false, 0, seed++);
      checkRopeShape<T>(tokens, 5, 96, 36, 5 * 96, layout, false, 0, seed++);
      checkRopeShape<T>(tokens, 1, 2, 2, 2, layout, false, 0, seed++);
    }
    // Heads with more pairs than one block takes (several blocks per head and token): scalar
    // (1101 pairs; head_dim 2202 is off the vector grid) and 16-byte items (513 and 1025 items
    // of kVector pairs in the half-split layout: more than a block's 4096 pairs of cos/sin for
    // 16-bit types; the interleaved layout has twice the items, of half the pairs).
    checkRopeShape<T>(70, 2, 2202, 2202, 2 * 2202, layout, false, 0, seed++);
    checkRopeShape<T>(2, 2, 2202, 2202, 2 * 2202, layout, false, 0, seed++);
    for (int items : {513, 1025}) {
      const int wide = static_cast<int>(2 * items * kVector);
      checkRopeShape<T>(70, 1, wide, wide, wide, layout, false, 0, seed++);
    }
  }
}

TEST(RopeCuda, MatchesCpuBitwiseOnEveryPath) {
  REE_SKIP_WITHOUT_GPU();
  checkRopePaths<float>(3000);
  checkRopePaths<bf16_t>(4000);
  checkRopePaths<f16_t>(5000);
}

TEST(RopeCuda, MoreBlockPartsThanTheGridHolds) {
  // Past the grid's 65535 blocks along y (parts of a head) and z (groups of heads), blocks loop
  // over parts. One decode token each: 16.7M two-element heads (more than 65535 groups of heads
  // for blocks of up to 256 heads), and one head of 2.1M pairs (more than 65535 parts of 32).
  REE_SKIP_WITHOUT_GPU();
  const int heads = 256 * 65535 + 3;
  checkRopeShape<bf16_t>(1, heads, 2, 2, 2 * static_cast<int64_t>(heads), RopeLayout::kInterleaved,
                         false, 0, 77);
  const int long_head = 2 * (32 * 65536 + 1);
  checkRopeShape<bf16_t>(1, 1, long_head, long_head, long_head, RopeLayout::kHalfSplit, false, 0,
                         78);
}

}  // namespace
}  // namespace ree
