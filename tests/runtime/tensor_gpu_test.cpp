// Tensor utilities of the runtime on a GPU: copyColumns on the device equals the host gather.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ree/runtime/tensor.h"
#include "tensor_test_common.h"
#include "test_util.h"

namespace ree {
namespace {

using tensor_test::expectedColumns;
using tensor_test::pattern;

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
