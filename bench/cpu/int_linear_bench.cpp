// CPU repops-2 (integer) linear beside repops-1 (fp32 fma chain) on the same inputs, bf16 x and w,
// fp32 y: time per call and effective GFLOP/s (2 M N K / time); repops-2 also with w prepared once
// (cpu::prepareIntLinearWeights, as the runtime does for model weights). The CPU target is
// that the integer path is no slower than repops-1 at M = 1 and M = 128 (4096 x 4096).
#include <benchmark/benchmark.h>

#include "linear_bench_util.h"
#include "ree/kernels/int_linear.h"
#include "ree/kernels/linear.h"

namespace {

template <bool kInteger>
void BM_Linear(benchmark::State& state) {
  ree::bench::timeLinearLayer(state, [](const ree::repops::LinearArgs& args) {
    return kInteger ? ree::repops::cpu::intLinear(args) : ree::repops::cpu::linear(args);
  });
}

// repops-2 with w prepared once (as the reproducible set does for model weights under
// --repops-spec repops-2): the digit planes are made on the first call, outside the timing that
// matters (google benchmark's warm-up), and reused.
void BM_IntLinearPrepared(benchmark::State& state) {
  std::unique_ptr<ree::repops::cpu::IntLinearWeights> prepared;
  ree::bench::timeLinearLayer(state, [&](const ree::repops::LinearArgs& args) {
    if (!prepared) {
      ree::Status status = ree::repops::cpu::prepareIntLinearWeights(args, &prepared);
      if (status != ree::Status::kSuccess) return status;
    }
    return ree::repops::cpu::intLinear(args, prepared.get());
  });
}

void shapes(benchmark::internal::Benchmark* b) {
  b->Args({1, 4096, 4096})->Args({16, 4096, 4096})->Args({128, 4096, 4096});
  b->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
}

BENCHMARK_TEMPLATE(BM_Linear, false)->Name("repops1_linear")->Apply(shapes);
BENCHMARK_TEMPLATE(BM_Linear, true)->Name("repops2_int_linear")->Apply(shapes);
BENCHMARK(BM_IntLinearPrepared)->Name("repops2_int_linear_prepared_w")->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
