// Tensor utilities of the runtime on a GPU: copyColumns on the device equals the host gather.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ree/runtime/tensor.h"
#include "test_util.h"

namespace ree {
namespace {

std::vector<float> pattern(int64_t rows, int64_t cols) {
  std::vector<float> values(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(i) * 0.5f - 7.0f;
  return values;
}

std::vector<float> expectedColumns(const std::vector<float>& src, int64_t cols, int64_t rows,
                                   int64_t begin, int64_t width) {
  std::vector<float> out;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < width; ++c)
      out.push_back(src[static_cast<size_t>(r * cols + begin + c)]);
  }
  return out;
}

TEST(CopyColumns, GpuMatchesTheCpu) {
  REE_SKIP_WITHOUT_GPU();
  const int64_t rows = 7, cols = 6144, begin = 4096, width = 1024;
  std::vector<float> src = pattern(rows, cols);
  Tensor host = Tensor::wrap(src.data(), Device::cpu(), DType::kF32, {rows, cols});
  Tensor device, out;
  ASSERT_EQ(toDevice(host, Device::cuda(0), &device), Status::kSuccess) << lastErrorMessage();
  ASSERT_EQ(Tensor::empty(Device::cuda(0), DType::kF32, {rows, width}, &out), Status::kSuccess);
  ASSERT_EQ(copyColumns(device, begin, out), Status::kSuccess) << lastErrorMessage();
  std::vector<float> got(static_cast<size_t>(rows * width));
  ASSERT_EQ(copyTensor(out, Tensor::wrap(got.data(), Device::cpu(), DType::kF32, {rows, width})),
            Status::kSuccess);
  std::vector<float> want = expectedColumns(src, cols, rows, begin, width);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace ree
