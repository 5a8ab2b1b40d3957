// CPU work splitting for RepOps. Results never depend on the thread count: work is split over
// independent outputs only (rows, heads, output tiles), never inside a reduction.
#pragma once

#include <cstdint>
#include <functional>

namespace ree {

// Threads used by CPU kernels; 0 means std::thread::hardware_concurrency(). Default: env
// REE_CPU_THREADS if set, else all hardware threads.
void setCpuThreads(int threads);
int cpuThreads();

// Calls body(begin, end) on disjoint ranges covering [0, n), possibly concurrently; returns when
// all are done. `grain` is the smallest range worth a thread. Nested calls run serially.
void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace ree
