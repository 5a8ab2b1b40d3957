// What the build and the machine offer; lets callers and tests choose or skip the CUDA path.
#pragma once

#include <cstdint>

namespace ree {

// True when this library was compiled with its CUDA kernels.
bool builtWithCuda();

// Number of usable CUDA devices (0 when built without CUDA, with no driver, or with no GPU).
// `why` (optional) receives a one-line reason when the answer is 0.
int cudaDeviceCount(const char** why = nullptr);

// Bytes of host memory a new allocation can still get: the smallest of the kernel's estimate of
// available memory (MemAvailable in /proc/meminfo, which counts caches it would give back) and the
// room left under this process's cgroup memory limit (v2 memory.max, or v1 limit_in_bytes), when
// either is readable; else the physical memory. Never negative.
int64_t hostAvailableMemoryBytes();

}  // namespace ree
