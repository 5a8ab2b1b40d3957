// Grid arithmetic shared by the CUDA kernels of RepOps (not installed).
#pragma once

namespace ree {
// Blocks of size b that cover a elements.
inline unsigned divUp(long long a, long long b) {
  return static_cast<unsigned>((a + b - 1) / b);
}
}  // namespace ree
