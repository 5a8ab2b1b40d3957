// Internal switch between the two prefill kernels of CUDA attention, for benchmarks that time them
// side by side (bench/cuda/attention_bench.cu). Both give the same bits (docs/repops-spec/
// attention.md); the tiled kernel is the default. Not installed, not part of the API.
#pragma once

namespace ree {
namespace repops {
namespace cuda {

enum class PrefillKernel : int {
  kTiled = 0,        // attention_prefill_tiled.cuh (head_dim % 8 == 0; others use the chunk kernel)
  kChunk = 1,        // the chunk kernel's flash mode (the organisation before the tiled kernel)
  kTiledRows64 = 2,  // the tiled kernel with tiles of at most 64 rows (4 rows per thread)
};

// Process-wide; takes effect on the next attention call.
void setPrefillKernelForBenchmark(PrefillKernel kernel);

}  // namespace cuda
}  // namespace repops
}  // namespace ree
