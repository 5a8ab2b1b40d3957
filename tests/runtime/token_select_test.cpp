// Device-to-host copies waited for later (PendingCopy) and greedy token selection where the
// logits are (GreedyTokens), on the CPU: the engine's last stage takes both paths on every device.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ree/runtime/pending_copy.h"
#include "ree/runtime/tensor.h"
#include "ree/runtime/token_select.h"
#include "tensor_test_common.h"
#include "test_util.h"
#include "token_select_test_common.h"

namespace ree {
namespace {

using token_select_test::referenceArgmax;
using token_select_test::trickyLogits;

TEST(PendingCopy, FromTheCpuCopiesAtOnce) {
  std::vector<float> src = tensor_test::pattern(3, 5), dst(15, -1.0f);
  PendingCopy copy;
  ASSERT_EQ(PendingCopy::start(Tensor::wrap(src.data(), Device::cpu(), DType::kF32, {3, 5}),
                               Tensor::wrap(dst.data(), Device::cpu(), DType::kF32, {15}), &copy),
            Status::kSuccess)
      << lastErrorMessage();
  EXPECT_FALSE(copy.pending());
  EXPECT_EQ(dst, src);
  EXPECT_EQ(copy.wait(), Status::kSuccess);
  EXPECT_EQ(copy.wait(), Status::kSuccess);  // nothing pending: at once, again
}

TEST(PendingCopy, RejectsMismatchedTensors) {
  std::vector<float> src(8), dst(8);
  std::vector<uint16_t> half(8);
  const Tensor from = Tensor::wrap(src.data(), Device::cpu(), DType::kF32, {8});
  PendingCopy copy;
  EXPECT_EQ(
      PendingCopy::start(from, Tensor::wrap(dst.data(), Device::cpu(), DType::kF32, {7}), &copy),
      Status::kInvalidArgument);
  EXPECT_EQ(
      PendingCopy::start(from, Tensor::wrap(half.data(), Device::cpu(), DType::kBF16, {8}), &copy),
      Status::kInvalidArgument);
  EXPECT_EQ(
      PendingCopy::start(from, Tensor::wrap(dst.data(), Device::cpu(), DType::kF32, {8}), nullptr),
      Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("PendingCopy"), std::string::npos);
}

TEST(GreedyTokens, CpuSelectsTorchArgmaxOfEveryRow) {
  for (int64_t vocab : {1, 7, 1000, 32769}) {
    const int64_t rows = 12;
    std::vector<float> logits = trickyLogits(rows, vocab, static_cast<uint32_t>(vocab));
    if (vocab < 4) logits = std::vector<float>(static_cast<size_t>(rows * vocab), 0.25f);
    GreedyTokens greedy;
    ASSERT_EQ(greedy.start(Tensor::wrap(logits.data(), Device::cpu(), DType::kF32, {rows, vocab})),
              Status::kSuccess)
        << lastErrorMessage();
    std::vector<int32_t> tokens;
    ASSERT_EQ(greedy.wait(&tokens), Status::kSuccess) << lastErrorMessage();
    EXPECT_EQ(tokens, referenceArgmax(logits, rows, vocab)) << "vocab " << vocab;
  }
}

TEST(GreedyTokens, EachStartReplacesTheLastRows) {
  GreedyTokens greedy;
  std::vector<int32_t> tokens;
  EXPECT_EQ(greedy.wait(&tokens), Status::kInvalidArgument);  // no start() yet
  std::vector<float> many = trickyLogits(6, 50, 1), one = trickyLogits(1, 50, 2);
  ASSERT_EQ(greedy.start(Tensor::wrap(many.data(), Device::cpu(), DType::kF32, {6, 50})),
            Status::kSuccess);
  ASSERT_EQ(greedy.start(Tensor::wrap(one.data(), Device::cpu(), DType::kF32, {1, 50})),
            Status::kSuccess);
  ASSERT_EQ(greedy.wait(&tokens), Status::kSuccess);
  EXPECT_EQ(tokens, referenceArgmax(one, 1, 50));
}

TEST(GreedyTokens, RejectsLogitsThatAreNotFp32Rows) {
  std::vector<float> flat(10);
  std::vector<uint16_t> half(10);
  GreedyTokens greedy;
  EXPECT_EQ(greedy.start(Tensor::wrap(flat.data(), Device::cpu(), DType::kF32, {10})),
            Status::kInvalidArgument);
  EXPECT_EQ(greedy.start(Tensor::wrap(half.data(), Device::cpu(), DType::kBF16, {2, 5})),
            Status::kInvalidArgument);
  EXPECT_EQ(greedy.start(Tensor::wrap(flat.data(), Device::cpu(), DType::kF32, {0, 10})),
            Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("GreedyTokens"), std::string::npos);
}

}  // namespace
}  // namespace ree
