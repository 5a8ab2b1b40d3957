// Helpers shared by tensor_test.cpp and tensor_gpu_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

namespace ree::tensor_test {

// [rows, cols] of distinct fp32 bit patterns.
inline std::vector<float> pattern(int64_t rows, int64_t cols) {
  std::vector<float> values(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(i) * 0.5f - 7.0f;
  return values;
}

// Independent reference: element (r, begin + c) of the source for every (r, c).
inline std::vector<float> expectedColumns(const std::vector<float>& src, int64_t cols, int64_t rows,
                                          int64_t begin, int64_t width) {
  std::vector<float> out;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < width; ++c)
      out.push_back(src[static_cast<size_t>(r * cols + begin + c)]);
  }
  return out;
}

}  // namespace ree::tensor_test
