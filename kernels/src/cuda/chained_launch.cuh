// Internal: programmatic dependent launch for the kernels of a decode step (not installed).
//
// A decode step is a chain of ~390 short dependent kernels; without help the GPU idles about a
// microsecond or two between two of them (the next grid is launched only after the previous one
// has completed and flushed). A kernel started with launchChained() may be launched while its
// predecessor in the stream is still running: it calls waitForPredecessor() before touching
// global memory (which returns once the predecessor has completed and its writes are visible),
// and allowSuccessorLaunch() to let the next chained kernel be launched as soon as every block of
// this one is running. Nothing about the arithmetic changes. On GPUs before Hopper the attribute
// and both calls have no effect.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "ree/core/cuda_check.h"

namespace ree::repops::cuda {

__device__ __forceinline__ void waitForPredecessor() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void allowSuccessorLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Launches `kernel` like kernel<<<grid, block, shared_bytes, stream>>>(args...), chained to the
// stream's previous kernel. As with <<<>>>, a launch error surfaces through cudaGetLastError()
// (REE_CUDA_CHECK_LAUNCH() after the call). Every kernel launched here must call
// waitForPredecessor() (then allowSuccessorLaunch()) before it touches memory that a kernel may
// write; only data that no kernel writes (model weights, tables uploaded by copies, which a chained
// kernel cannot overtake) may be read before it.
template <typename... Params, typename... Args>
void launchChained(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                   cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  (void)cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace ree::repops::cuda
