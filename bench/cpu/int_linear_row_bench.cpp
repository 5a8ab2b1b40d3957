// CPU repops-3 (row-exponent integer) linear beside repops-2 (block-exponent integer) and repops-1
// (fp32 fma chain) on the same inputs, bf16 x and w, fp32 y: time per call and effective GFLOP/s
// (2 M N K / time); the integer specs also with w prepared once (as the runtime does for model
// weights). The CPU target is that the integer path is no slower than repops-1 at M = 1
// and M = 128 (4096 x 4096) on the 2-core CI machine.
#include <benchmark/benchmark.h>

#include "linear_bench_util.h"
#include "ree/kernels/int_linear.h"
#include "ree/kernels/int_linear_row.h"
#include "ree/kernels/linear.h"

namespace {

using ree::repops::LinearArgs;

void BM_Repops1(benchmark::State& state) {
  ree::bench::timeLinearLayer(state,
                              [](const LinearArgs& a) { return ree::repops::cpu::linear(a); });
}

void BM_Repops2Prepared(benchmark::State& state) {
  std::unique_ptr<ree::repops::cpu::IntLinearWeights> prepared;
  ree::bench::timeLinearLayer(state, [&](const LinearArgs& args) {
    if (!prepared) {
      ree::Status status = ree::repops::cpu::prepareIntLinearWeights(args, &prepared);
      if (status != ree::Status::kSuccess) return status;
    }
    return ree::repops::cpu::intLinear(args, prepared.get());
  });
}

template <bool kSimd>
void BM_Repops3(benchmark::State& state) {
  ree::repops::cpu::setIntLinearRowSimdEnabled(kSimd);
  ree::bench::timeLinearLayer(
      state, [](const LinearArgs& a) { return ree::repops::cpu::intLinearRow(a); });
  ree::repops::cpu::setIntLinearRowSimdEnabled(true);
}

// w prepared once (its row exponents): the runtime's path for model weights.
void BM_Repops3Prepared(benchmark::State& state) {
  std::unique_ptr<ree::repops::cpu::IntLinearRowWeights> prepared;
  ree::bench::timeLinearLayer(state, [&](const LinearArgs& args) {
    if (!prepared) {
      ree::Status status = ree::repops::cpu::prepareIntLinearRowWeights(args, &prepared);
      if (status != ree::Status::kSuccess) return status;
    }
    return ree::repops::cpu::intLinearRow(args, prepared.get());
  });
}

void shapes(benchmark::internal::Benchmark* b) {
  b->Args({1, 4096, 4096})->Args({16, 4096, 4096})->Args({128, 4096, 4096});
  b->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
}

BENCHMARK(BM_Repops1)->Name("repops1_linear")->Apply(shapes);
BENCHMARK(BM_Repops2Prepared)->Name("repops2_int_linear_prepared_w")->Apply(shapes);
BENCHMARK_TEMPLATE(BM_Repops3, true)->Name("repops3_int_linear_row")->Apply(shapes);
BENCHMARK(BM_Repops3Prepared)->Name("repops3_int_linear_row_prepared_w")->Apply(shapes);
BENCHMARK_TEMPLATE(BM_Repops3, false)
    ->Name("repops3_int_linear_row_scalar")
    ->Args({1, 4096, 4096})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
