// CPU repops-2 (integer) linear beside repops-1 (fp32 fma chain) on the same inputs, bf16 x and w,
// fp32 y: time per call and effective GFLOP/s (2 M N K / time). The CPU target is that
// the integer path is no slower than repops-1 at M = 1 and M = 128 (4096 x 4096).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "ree/core/parallel.h"
#include "ree/kernels/int_linear.h"
#include "ree/kernels/linear.h"

namespace {

template <bool kInteger>
void BM_Linear(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<ree::bf16_t> x(static_cast<size_t>(m * k)), w(static_cast<size_t>(n * k));
  for (auto& v : x)
    v = ree::toBF16(dist(rng));
  for (auto& v : w)
    v = ree::toBF16(dist(rng) * 0.05f);
  std::vector<float> y(static_cast<size_t>(m * n));
  ree::repops::LinearArgs args;
  args.x = x.data();
  args.x_dtype = ree::DType::kBF16;
  args.w = w.data();
  args.w_dtype = ree::DType::kBF16;
  args.y = y.data();
  args.m = m;
  args.n = n;
  args.k = k;
  for (auto _ : state) {
    ree::Status status =
        kInteger ? ree::repops::cpu::intLinear(args) : ree::repops::cpu::linear(args);
    if (status != ree::Status::kSuccess) {
      state.SkipWithError(ree::lastErrorMessage());
      break;
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP"] =
      benchmark::Counter(2.0 * m * n * k * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["threads"] = ree::cpuThreads();
}

void shapes(benchmark::internal::Benchmark* b) {
  b->Args({1, 4096, 4096})->Args({16, 4096, 4096})->Args({128, 4096, 4096});
  b->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
}

BENCHMARK_TEMPLATE(BM_Linear, false)->Name("repops1_linear")->Apply(shapes);
BENCHMARK_TEMPLATE(BM_Linear, true)->Name("repops2_int_linear")->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
