// The storage conversions of numeric.h compiled for the GPU give the same bits as the CPU build,
// for ALL 2^32 float inputs (bf16 and f16), and every 16-bit pattern converts back identically.
// The narrowing is two different implementations: the GPU uses the hardware conversion
// instruction (plus NaN canonicalisation), the CPU integer rounding, so the sweep is what proves
// them equal.
#include <cuda_runtime.h>

#include <thread>
#include <vector>

#include "ree/kernels/numeric.h"
#include "test_util.h"

namespace ree {
namespace {

// The pair form takes every float once as its low and once (as the partner of ~bits) as its
// high element.
__device__ __host__ inline float pairPartner(uint32_t bits) {
  return bitsFloat(~bits);
}

__global__ void toNarrowKernel(uint32_t base, uint32_t count, uint16_t* bf16_out, uint16_t* f16_out,
                               uint32_t* pair_out, uint32_t* canonical_out) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  float value = bitsFloat(base + i);
  bf16_out[i] = toBF16(value).bits;
  f16_out[i] = toF16(value).bits;
  pair_out[i] = toBF16x2(value, pairPartner(base + i));
  canonical_out[i] = static_cast<uint32_t>(storeCanonical<bf16_t>(value).bits) |
                     (static_cast<uint32_t>(storeCanonical<f16_t>(value).bits) << 16);
}

__global__ void toWideKernel(uint32_t* from_bf16, uint32_t* from_f16) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= 0x10000u) return;
  from_bf16[i] = floatBits(toFloat(bf16_t{static_cast<uint16_t>(i)}));
  from_f16[i] = floatBits(toFloat(f16_t{static_cast<uint16_t>(i)}));
}

TEST(NumericCuda, NarrowingMatchesCpuForAllFloats) {
  REE_SKIP_WITHOUT_GPU();
  const uint32_t chunk = 1u << 28;
  uint16_t *d_bf16 = nullptr, *d_f16 = nullptr;
  uint32_t *d_pair = nullptr, *d_canonical = nullptr;
  ASSERT_EQ(cudaMalloc(&d_bf16, chunk * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_f16, chunk * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_pair, chunk * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_canonical, chunk * 4), cudaSuccess);
  std::vector<uint16_t> bf16(chunk), f16(chunk);
  std::vector<uint32_t> pair(chunk), canonical(chunk);
  uint64_t mismatches = 0;
  uint64_t hash = 1469598103934665603ull;
  unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  for (uint64_t base = 0; base < (1ull << 32); base += chunk) {
    toNarrowKernel<<<chunk / 256, 256>>>(static_cast<uint32_t>(base), chunk, d_bf16, d_f16, d_pair,
                                         d_canonical);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(bf16.data(), d_bf16, chunk * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(f16.data(), d_f16, chunk * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(pair.data(), d_pair, chunk * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(canonical.data(), d_canonical, chunk * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    std::vector<uint64_t> bad(workers, 0);
    std::vector<std::thread> threads;
    for (unsigned w = 0; w < workers; ++w) {
      threads.emplace_back([&, w] {
        for (uint64_t i = w; i < chunk; i += workers) {
          const uint32_t bits = static_cast<uint32_t>(base + i);
          float value = bitsFloat(bits);
          const uint32_t expected_pair =
              static_cast<uint32_t>(toBF16(value).bits) |
              (static_cast<uint32_t>(toBF16(pairPartner(bits)).bits) << 16);
          // storeCanonical<T>(v) is defined as storeAs<T> of the canonical float NaN.
          const float canonical_value = value != value ? bitsFloat(0x7fc00000u) : value;
          const uint32_t expected_canonical =
              static_cast<uint32_t>(toBF16(canonical_value).bits) |
              (static_cast<uint32_t>(toF16(canonical_value).bits) << 16);
          bad[w] += (toBF16(value).bits != bf16[i]) + (toF16(value).bits != f16[i]) +
                    (expected_pair != pair[i]) + (expected_canonical != canonical[i]);
        }
      });
    }
    for (auto& t : threads)
      t.join();
    for (uint64_t b : bad)
      mismatches += b;
    hash = test::fnv1a(bf16.data(), chunk * 2, hash);
    hash = test::fnv1a(f16.data(), chunk * 2, hash);
  }
  cudaFree(d_bf16);
  cudaFree(d_f16);
  cudaFree(d_pair);
  cudaFree(d_canonical);
  std::printf(
      "all 2^32 floats -> bf16/f16/bf16 pairs/canonical-NaN stores on GPU: %llu mismatches vs CPU, "
      "output hash %s\n",
      static_cast<unsigned long long>(mismatches), test::hex64(hash).c_str());
  EXPECT_EQ(mismatches, 0u);
}

TEST(NumericCuda, WideningMatchesCpuForAll16BitPatterns) {
  REE_SKIP_WITHOUT_GPU();
  uint32_t *d_a = nullptr, *d_b = nullptr;
  ASSERT_EQ(cudaMalloc(&d_a, 0x10000 * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_b, 0x10000 * 4), cudaSuccess);
  toWideKernel<<<256, 256>>>(d_a, d_b);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<uint32_t> a(0x10000), b(0x10000);
  ASSERT_EQ(cudaMemcpy(a.data(), d_a, a.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b.data(), d_b, b.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (uint32_t i = 0; i < 0x10000; ++i) {
    ASSERT_EQ(a[i], floatBits(toFloat(bf16_t{static_cast<uint16_t>(i)}))) << "bf16 " << i;
    ASSERT_EQ(b[i], floatBits(toFloat(f16_t{static_cast<uint16_t>(i)}))) << "f16 " << i;
  }
  cudaFree(d_a);
  cudaFree(d_b);
}

}  // namespace
}  // namespace ree
