// Helpers shared by the stage transport tests (stage_transport_test.cpp on CPU tensors,
// stage_transport_gpu_test.cpp on device tensors).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ree::comm::test {

// splitmix64 of (seed, word index): any length, any offset, no state shared between ranks.
inline std::vector<uint8_t> pattern(uint64_t seed, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(out.data() + i, &z, std::min<size_t>(8, bytes - i));
  }
  return out;
}

}  // namespace ree::comm::test
