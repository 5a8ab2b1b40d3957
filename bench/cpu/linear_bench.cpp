// CPU linear layer throughput (GFLOP/s) beside a naive estimate of the machine's fp32 FMA peak:
// cores x 2 FMA units x 8 lanes (AVX2) x 2 FLOP x the clock measured by a dependent-add loop.
// The estimate is rough (turbo, SMT and AVX frequency offsets are ignored); it gives scale only.
#include <benchmark/benchmark.h>

#include <chrono>
#include <thread>

#include "linear_bench_util.h"
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
  ree::bench::timeLinearLayer(
      state, [](const ree::repops::LinearArgs& args) { return ree::repops::cpu::linear(args); });
  static const double peak_gflops = [] {
    double hz = estimateClockHz();
    int cores = ree::cpuThreads();
    return cores * 2.0 * 8.0 * 2.0 * hz / 1e9;
  }();
  state.counters["peak_est_GFLOP/s"] = peak_gflops;
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
