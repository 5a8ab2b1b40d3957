// Tensor utilities of the runtime: copyColumns, which splits fused projection outputs.
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

TEST(CopyColumns, CpuCopiesEachBlockOfEveryRow) {
  const int64_t rows = 5, cols = 24;
  std::vector<float> src = pattern(rows, cols);
  Tensor fused = Tensor::wrap(src.data(), Device::cpu(), DType::kF32, {rows, cols});
  for (auto block : {std::pair<int64_t, int64_t>{0, 16}, {16, 4}, {20, 4}, {3, 1}}) {
    Tensor out;
    ASSERT_EQ(Tensor::empty(Device::cpu(), DType::kF32, {rows, block.second}, &out),
              Status::kSuccess);
    ASSERT_EQ(copyColumns(fused, block.first, out), Status::kSuccess) << lastErrorMessage();
    std::vector<float> want = expectedColumns(src, cols, rows, block.first, block.second);
    EXPECT_EQ(std::memcmp(out.data(), want.data(), want.size() * sizeof(float)), 0)
        << "columns [" << block.first << ", +" << block.second << ")";
  }
}

TEST(CopyColumns, RejectsBlocksOutsideTheSourceAndMismatchedTensors) {
  std::vector<float> src = pattern(2, 8);
  Tensor fused = Tensor::wrap(src.data(), Device::cpu(), DType::kF32, {2, 8});
  Tensor out;
  ASSERT_EQ(Tensor::empty(Device::cpu(), DType::kF32, {2, 4}, &out), Status::kSuccess);
  EXPECT_EQ(copyColumns(fused, 5, out), Status::kInvalidArgument);  // 5 + 4 > 8
  EXPECT_NE(std::string(lastErrorMessage()).find("copyColumns"), std::string::npos);
  Tensor wrong_rows;
  ASSERT_EQ(Tensor::empty(Device::cpu(), DType::kF32, {3, 4}, &wrong_rows), Status::kSuccess);
  EXPECT_EQ(copyColumns(fused, 0, wrong_rows), Status::kInvalidArgument);
  Tensor wrong_dtype;
  ASSERT_EQ(Tensor::empty(Device::cpu(), DType::kBF16, {2, 4}, &wrong_dtype), Status::kSuccess);
  EXPECT_EQ(copyColumns(fused, 0, wrong_dtype), Status::kInvalidArgument);
}

}  // namespace
}  // namespace ree
