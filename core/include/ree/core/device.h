// What the build and the machine offer; lets callers and tests choose or skip the CUDA path.
#pragma once

namespace ree {

// True when this library was compiled with its CUDA kernels.
bool builtWithCuda();

// Number of usable CUDA devices (0 when built without CUDA, with no driver, or with no GPU).
// `why` (optional) receives a one-line reason when the answer is 0.
int cudaDeviceCount(const char** why = nullptr);

}  // namespace ree
