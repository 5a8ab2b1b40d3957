// The CPU kernels' AVX2+FMA build (kernels/src/cpu/vector_math.h) beside their portable x86-64
// build in the same run (setVectorMathEnabled): sigmoid and exp over 2^20 floats, SiLU-gate
// (swiglu) over 1024 x 1024, RMSNorm, LayerNorm and softmax over 1024 x 1024 fp32 rows, and one
// attention decode row set (32 query heads, 8 KV heads, head_dim 128, 2048 cached positions).
// Argument 0: portable build, 1: AVX2+FMA build. Nothing is asserted; the bits are the same
// (kernels_cpu_vector_math_test).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "ree/kernels/attention.h"
#include "ree/kernels/math_ops.h"
#include "ree/kernels/pointwise.h"
#include "ree/kernels/rowops.h"

namespace {

using ree::DType;
using ree::Status;
namespace cpu = ree::repops::cpu;

std::vector<float> normal(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v)
    x = dist(rng);
  return v;
}

// Runs body under the build that state.range(0) names and reports failures.
template <typename Body>
void timeBuild(benchmark::State& state, Body body) {
  cpu::setVectorMathEnabled(state.range(0) != 0);
  for (auto _ : state) {
    if (body() != Status::kSuccess) {
      state.SkipWithError("kernel failed");
      break;
    }
  }
  cpu::setVectorMathEnabled(true);
  state.SetLabel(state.range(0) ? "avx2+fma" : "portable");
}

void BM_Sigmoid(benchmark::State& state) {
  const std::vector<float> x = normal(1 << 20, 1, 4.0f);
  std::vector<float> y(x.size());
  timeBuild(state, [&] {
    return cpu::unaryMath(ree::UnaryMathOp::kSigmoid, x.data(), y.data(), (int64_t)x.size());
  });
}

void BM_Exp(benchmark::State& state) {
  const std::vector<float> x = normal(1 << 20, 2, 4.0f);
  std::vector<float> y(x.size());
  timeBuild(state, [&] {
    return cpu::unaryMath(ree::UnaryMathOp::kExp, x.data(), y.data(), (int64_t)x.size());
  });
}

void BM_SwiGlu(benchmark::State& state) {
  const int64_t n = 1024;
  const std::vector<float> gate = normal(n * n, 3, 2.0f), up = normal(n * n, 4);
  std::vector<float> y(gate.size());
  timeBuild(state, [&] {
    return cpu::gated(ree::Activation::kSilu, DType::kF32, gate.data(), n, up.data(), n, y.data(),
                      n, n, n);
  });
}

void BM_RmsNorm(benchmark::State& state) {
  const int64_t n = 1024;
  const std::vector<float> x = normal(n * n, 5), w = normal(n, 6);
  std::vector<float> y(x.size());
  timeBuild(state, [&] {
    return cpu::rmsNorm({x.data(), DType::kF32, n}, {w.data(), DType::kF32},
                        {y.data(), DType::kF32, n}, n, n, 1e-6f);
  });
}

void BM_LayerNorm(benchmark::State& state) {
  const int64_t n = 1024;
  const std::vector<float> x = normal(n * n, 7), w = normal(n, 8), b = normal(n, 9);
  std::vector<float> y(x.size());
  timeBuild(state, [&] {
    return cpu::layerNorm({x.data(), DType::kF32, n}, {w.data(), DType::kF32},
                          {b.data(), DType::kF32}, {y.data(), DType::kF32, n}, n, n, 1e-5f);
  });
}

void BM_Softmax(benchmark::State& state) {
  const int64_t n = 1024;
  const std::vector<float> x = normal(n * n, 10, 3.0f);
  std::vector<float> y(x.size());
  timeBuild(state, [&] {
    return cpu::softmax({x.data(), DType::kF32, n}, {y.data(), DType::kF32, n}, n, n);
  });
}

// One decode step's attention of one layer: a single new token over 2048 cached positions, KV in
// one contiguous run of blocks of 16.
void BM_AttentionDecode(benchmark::State& state) {
  const int heads = 32, kv_heads = 8, head_dim = 128, cached = 2048, block = 16;
  const int positions = cached + 1, blocks = (positions + block - 1) / block;
  const std::vector<float> q = normal(size_t(heads) * head_dim, 11);
  const std::vector<float> k = normal(size_t(blocks) * block * kv_heads * head_dim, 12);
  const std::vector<float> v = normal(k.size(), 13);
  std::vector<float> out(q.size());
  std::vector<int32_t> table(blocks);
  for (int i = 0; i < blocks; ++i)
    table[i] = i;
  const int32_t query_offsets[2] = {0, 1};
  const int32_t cached_lens[1] = {cached};
  ree::repops::AttentionArgs args{};
  args.q = q.data();
  args.q_dtype = DType::kF32;
  args.out = out.data();
  args.out_dtype = DType::kF32;
  args.batch = 1;
  args.query_offsets = query_offsets;
  args.cached_lens = cached_lens;
  args.n_heads = heads;
  args.n_kv_heads = kv_heads;
  args.head_dim = head_dim;
  args.cache.k = k.data();
  args.cache.v = v.data();
  args.cache.dtype = DType::kF32;
  args.cache.block_table = table.data();
  args.cache.max_blocks_per_seq = blocks;
  args.cache.num_blocks = blocks;
  args.cache.block_size = block;
  timeBuild(state, [&] { return cpu::attention(args); });
}

BENCHMARK(BM_Sigmoid)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Exp)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SwiGlu)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RmsNorm)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LayerNorm)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Softmax)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AttentionDecode)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
