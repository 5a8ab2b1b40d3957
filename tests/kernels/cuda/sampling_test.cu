// CUDA argmax and sampling == CPU, token for token, on random batches, vocabularies (odd sizes,
// beyond one reduction chunk) and parameters; Philox on the device against the host.
#include <cuda_runtime.h>

#include <vector>

#include "cuda_test_util.h"
#include "ree/kernels/sampling.h"

namespace ree {
namespace {

using repops::SamplingParams;
using test::toDevice;
using test::toHost;

__global__ void uniformKernel(uint64_t seed, uint64_t sequence, int n, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = samplingUniform(seed, sequence, static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull);
}

TEST(SamplingCuda, UniformMatchesHost) {
  REE_SKIP_WITHOUT_GPU();
  const int n = 1 << 20;
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, n * sizeof(float)), cudaSuccess);
  uniformKernel<<<(n + 255) / 256, 256>>>(0x1234567890abcdefull, 77, n, device);
  std::vector<float> got = toHost(device, n), expected(n);
  for (int i = 0; i < n; ++i) {
    expected[i] = samplingUniform(0x1234567890abcdefull, 77,
                                  static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull);
  }
  EXPECT_EQ(test::firstBitDifference(got, expected), -1);
  cudaFree(device);
}

std::vector<float> makeLogits(int64_t batch, int64_t vocab, uint64_t seed) {
  std::vector<float> logits = test::randomValues<float>(batch * vocab, seed, 3.0f);
  std::mt19937_64 rng(seed);
  for (int64_t b = 0; b < batch; ++b) {  // ties, duplicates and the odd special value
    float* row = logits.data() + b * vocab;
    for (int k = 0; k < 8; ++k)
      row[rng() % vocab] = row[rng() % vocab];
    if (rng() % 16 == 0) row[rng() % vocab] = -INFINITY;
    if (rng() % 40 == 0) row[rng() % vocab] = NAN;
    if (rng() % 40 == 0) row[rng() % vocab] = INFINITY;
    if (rng() % 20 == 0) {
      for (int64_t i = 0; i < vocab; ++i)
        row[i] = static_cast<float>(rng() % 4);  // many ties
    }
  }
  return logits;
}

TEST(SamplingCuda, ArgmaxAndSampleMatchCpu) {
  REE_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(2025);
  const int64_t vocabs[] = {1, 2, 127, 128, 129, 1000, 4099, 32000, 128256, 151936};
  for (int64_t vocab : vocabs) {
    for (int trial = 0; trial < 3; ++trial) {
      const int64_t batch = 1 + rng() % 24;
      std::vector<float> logits = makeLogits(batch, vocab, rng());
      std::vector<SamplingParams> params(batch);
      for (auto& p : params) {
        const int kind = rng() % 6;
        p.temperature = kind == 0 ? 0.0f : 0.05f + static_cast<float>(rng() % 200) / 100.0f;
        p.top_k = kind == 1 ? 1 : (kind == 2 ? 0 : static_cast<int32_t>(rng() % 300));
        p.top_p = (rng() & 1) ? 1.0f : 0.05f + static_cast<float>(rng() % 95) / 100.0f;
        p.seed = rng();
        p.sequence = rng() % 1000;
        p.step = rng() % 100000;
      }
      std::vector<int32_t> cpu_argmax(batch), cpu_sample(batch);
      ASSERT_EQ(repops::cpu::argmax(logits.data(), batch, vocab, cpu_argmax.data()),
                Status::kSuccess);
      ASSERT_EQ(repops::cpu::sample(logits.data(), batch, vocab, params.data(), cpu_sample.data()),
                Status::kSuccess);
      float* dlogits = toDevice(logits);
      int32_t* dout = toDevice(std::vector<int32_t>(batch));
      ASSERT_EQ(repops::cuda::argmax(dlogits, batch, vocab, dout, nullptr), Status::kSuccess);
      EXPECT_EQ(toHost(dout, batch), cpu_argmax) << "argmax vocab " << vocab;
      ASSERT_EQ(repops::cuda::sample(dlogits, batch, vocab, params.data(), dout, nullptr),
                Status::kSuccess);
      EXPECT_EQ(toHost(dout, batch), cpu_sample) << "sample vocab " << vocab;
      cudaFree(dlogits);
      cudaFree(dout);
    }
  }
}

}  // namespace
}  // namespace ree
