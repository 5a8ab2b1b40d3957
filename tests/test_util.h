// Shared helpers for REE tests: deterministic random inputs, bitwise comparison, GPU skipping.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "ree/core/device.h"
#include "ree/kernels/numeric.h"

namespace ree::test {

// Skips the current test (reported as skipped by ctest) when no CUDA device can run it.
#define REE_SKIP_WITHOUT_GPU()                        \
  do {                                                \
    const char* ree_why_ = "";                        \
    if (::ree::cudaDeviceCount(&ree_why_) == 0) {     \
      GTEST_SKIP() << "no CUDA device: " << ree_why_; \
    }                                                 \
  } while (0)

// 64-bit FNV-1a over raw bytes: a cheap fingerprint for bitwise comparisons and golden pins.
inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t hash = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

template <typename T>
uint64_t hashOf(const std::vector<T>& values) {
  return fnv1a(values.data(), values.size() * sizeof(T));
}

// Index of the first element whose bits differ, or -1.
template <typename T>
long long firstBitDifference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<long long>(i);
  }
  return -1;
}

// Normal(0, scale) floats, rounded to the storage type T.
template <typename T>
std::vector<T> randomValues(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<T> out(n);
  for (auto& v : out)
    v = storeAs<T>(dist(rng));
  return out;
}

// Element `index` of a buffer holding storage dtype `dtype`, widened exactly to float. The tests'
// own copy of kernels/src/common/storage_element.h on purpose: inputs and outputs are not read with
// the code under test.
inline float loadElement(const void* base, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(base)[index];
    case DType::kBF16:
      return toFloat(static_cast<const bf16_t*>(base)[index]);
    case DType::kF16:
      return toFloat(static_cast<const f16_t*>(base)[index]);
  }
  return 0.0f;
}

// Stores `value` rounded to `dtype` (round to nearest even) as element `index` of the buffer.
inline void storeElement(void* base, DType dtype, int64_t index, float value) {
  switch (dtype) {
    case DType::kF32:
      static_cast<float*>(base)[index] = value;
      break;
    case DType::kBF16:
      static_cast<bf16_t*>(base)[index] = toBF16(value);
      break;
    case DType::kF16:
      static_cast<f16_t*>(base)[index] = toF16(value);
      break;
  }
}

// `value` rounded to `dtype` (round to nearest even) and widened back to float.
inline float roundTo(DType dtype, float value) {
  switch (dtype) {
    case DType::kF32:
      return value;
    case DType::kBF16:
      return toFloat(toBF16(value));
    case DType::kF16:
      return toFloat(toF16(value));
  }
  return value;
}

// The DType of a storage type: float, bf16_t or f16_t.
template <typename T>
constexpr DType dtypeOf() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16_t> || std::is_same_v<T, f16_t>,
                "dtypeOf: float, bf16_t or f16_t");
  if constexpr (std::is_same_v<T, float>) return DType::kF32;
  if constexpr (std::is_same_v<T, bf16_t>) return DType::kBF16;
  return DType::kF16;
}

inline std::string hex64(uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(value));
  return buf;
}

}  // namespace ree::test
