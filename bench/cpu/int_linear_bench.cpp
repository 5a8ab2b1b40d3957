// CPU repops-2 (integer) linear beside repops-1 (fp32 fma chain) on the same inputs, bf16 x and w,
// fp32 y: time per call and effective GFLOP/s (2 M N K / time). The CPU target is that
// the integer path is no slower than repops-1 at M = 1 and M = 128 (4096 x 4096).
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

void shapes(benchmark::internal::Benchmark* b) {
  b->Args({1, 4096, 4096})->Args({16, 4096, 4096})->Args({128, 4096, 4096});
  b->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
}

BENCHMARK_TEMPLATE(BM_Linear, false)->Name("repops1_linear")->Apply(shapes);
BENCHMARK_TEMPLATE(BM_Linear, true)->Name("repops2_int_linear")->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
