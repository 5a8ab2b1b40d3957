// The run-time choice of the CPU kernels' AVX2+FMA build (vector_math.h).
#include "vector_math.h"

#include <atomic>

#include "ree/kernels/math_ops.h"

namespace ree::repops::cpu {
namespace {

std::atomic<bool> g_vector_math_enabled{true};

bool cpuHasAvx2Fma() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

}  // namespace

bool vectorMathAvailable() {
  return cpuHasAvx2Fma() && g_vector_math_enabled.load(std::memory_order_relaxed);
}

void setVectorMathEnabled(bool enabled) {
  g_vector_math_enabled.store(enabled);
}

}  // namespace ree::repops::cpu
