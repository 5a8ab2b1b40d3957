#include "ree/core/device.h"

#if defined(REE_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace ree {

bool builtWithCuda() {
#if defined(REE_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

int cudaDeviceCount(const char** why) {
#if defined(REE_WITH_CUDA)
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = cudaGetErrorString(err);
    return 0;
  }
  if (count == 0 && why) *why = "no CUDA device";
  return count;
#else
  if (why) *why = "REE was built without CUDA";
  return 0;
#endif
}

}  // namespace ree
