// CPU linear layer throughput (GFLOP/s) beside a naive estimate of the machine's fp32 FMA peak:
// cores x 2 FMA units x 8 lanes (AVX2) x 2 FLOP x the clock measured by a dependent-add loop.
// The estimate is rough (turbo, SMT and AVX frequency offsets are ignored); it gives scale only.
#include <benchmark/benchmark.h>

#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "ree/core/parallel.h"
#include "ree/kernels/linear.h"

namespace {

// Cycles per second from a chain of dependent integer adds (1 cycle each on x86).
double estimateClockHz() {
  volatile uint64_t sink = 0;
  uint64_t value = 1;
  const uint64_t steps = 200000000;
  auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < steps; ++i) {
    value += i;
    asm volatile("" : "+r"(value));
  }
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  sink = value;
  (void)sink;
  return steps / seconds;
}

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
    if (ree::repops::cpu::linear(args) != ree::Status::kSuccess) {
      state.SkipWithError(ree::lastErrorMessage());
      break;
    }
    benchmark::DoNotOptimize(y.data());
  }
  const double flops = 2.0 * m * n * k;
  state.counters["GFLOP"] =
      benchmark::Counter(flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  static const double peak_gflops = [] {
    double hz = estimateClockHz();
    int cores = ree::cpuThreads();
    return cores * 2.0 * 8.0 * 2.0 * hz / 1e9;
  }();
  state.counters["peak_est_GFLOP/s"] = peak_gflops;
  state.counters["threads"] = ree::cpuThreads();
}

BENCHMARK(BM_Linear)
    ->Args({1, 4096, 4096})
    ->Args({16, 4096, 4096})
    ->Args({128, 4096, 4096})
    ->Args({512, 1024, 1024})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
