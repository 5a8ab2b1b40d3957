// Shared by the CPU linear benches (linear_bench.cpp: repops-1, int_linear_bench.cpp: repops-2):
// the same bf16 inputs for a shape and the same timing loop and GFLOP/s counter, so that the two
// layers' figures compare directly.
#pragma once

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "ree/core/parallel.h"
#include "ree/kernels/linear.h"

namespace ree::bench {

// x ~ N(0, 1) and w ~ N(0, 0.05) in bf16, fp32 y, dense: the arguments of one [M, K] x [N, K]^T.
struct LinearBenchInputs {
  std::vector<bf16_t> x, w;
  std::vector<float> y;
  repops::LinearArgs args;

  LinearBenchInputs(int64_t m, int64_t k, int64_t n) {
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    x.resize(static_cast<size_t>(m * k));
    w.resize(static_cast<size_t>(n * k));
    for (auto& v : x)
      v = toBF16(dist(rng));
    for (auto& v : w)
      v = toBF16(dist(rng) * 0.05f);
    y.resize(static_cast<size_t>(m * n));
    args.x = x.data();
    args.x_dtype = DType::kBF16;
    args.w = w.data();
    args.w_dtype = DType::kBF16;
    args.y = y.data();
    args.m = m;
    args.n = n;
    args.k = k;
  }
};

// Times layer(args) for the shape (M, K, N) = state.range(0..2) and sets the GFLOP (rate) and
// threads counters; a failing call ends the benchmark with its error message.
template <typename Layer>
void timeLinearLayer(benchmark::State& state, Layer&& layer) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  LinearBenchInputs inputs(m, k, n);
  for (auto _ : state) {
    if (layer(inputs.args) != Status::kSuccess) {
      state.SkipWithError(lastErrorMessage());
      break;
    }
    benchmark::DoNotOptimize(inputs.y.data());
  }
  state.counters["GFLOP"] =
      benchmark::Counter(2.0 * m * n * k * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["threads"] = cpuThreads();
}

}  // namespace ree::bench
