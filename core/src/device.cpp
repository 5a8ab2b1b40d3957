#include "ree/core/device.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

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

namespace {

// The first integer of a small text file (cgroup limits), or -1 when absent or "max".
int64_t readCounter(const char* path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return -1;
  try {
    return static_cast<int64_t>(std::stoll(word));
  } catch (...) {
    return -1;
  }
}

// MemAvailable of /proc/meminfo in bytes, or -1.
int64_t memAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    long long kib = -1;
    if (fields >> kib && kib >= 0) return static_cast<int64_t>(kib) * 1024;
  }
  return -1;
}

// Room left under the cgroup's memory limit, or -1 when there is no limit.
int64_t cgroupRoom() {
  int64_t limit = readCounter("/sys/fs/cgroup/memory.max");
  int64_t used = readCounter("/sys/fs/cgroup/memory.current");
  if (limit < 0) {
    limit = readCounter("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    used = readCounter("/sys/fs/cgroup/memory/memory.usage_in_bytes");
  }
  // cgroup v1 reports "no limit" as a huge number; anything beyond 2^60 is no limit.
  if (limit < 0 || limit > (int64_t{1} << 60)) return -1;
  return std::max<int64_t>(0, limit - std::max<int64_t>(0, used));
}

}  // namespace

int64_t hostAvailableMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  int64_t best = pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : INT64_MAX;
  for (int64_t bound : {memAvailable(), cgroupRoom()}) {
    if (bound >= 0) best = std::min(best, bound);
  }
  return best;
}

}  // namespace ree
