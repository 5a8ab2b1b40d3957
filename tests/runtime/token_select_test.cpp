// Device-to-host copies waited for later (PendingCopy) and token selection where the logits are
// (TokenSelection: argmax and sampling), on the CPU: the engine's last stage takes these paths on
// every device.
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
using token_select_test::samplingParams;
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

TEST(TokenSelection, CpuArgmaxIsTorchArgmaxOfEveryRow) {
  for (int64_t vocab : {1, 7, 1000, 32769}) {
    const int64_t rows = 12;
    std::vector<float> logits = trickyLogits(rows, vocab, static_cast<uint32_t>(vocab));
    if (vocab < 4) logits = std::vector<float>(static_cast<size_t>(rows * vocab), 0.25f);
    TokenSelection select;
    ASSERT_EQ(
        select.startArgmax(Tensor::wrap(logits.data(), Device::cpu(), DType::kF32, {rows, vocab})),
        Status::kSuccess)
        << lastErrorMessage();
    std::vector<int32_t> tokens;
    ASSERT_EQ(select.wait(&tokens), Status::kSuccess) << lastErrorMessage();
    EXPECT_EQ(tokens, referenceArgmax(logits, rows, vocab)) << "vocab " << vocab;
    EXPECT_EQ(std::vector<int32_t>(select.ids(), select.ids() + rows), tokens);
  }
}

// The sampler over all rows at once gives each row what the one-row kernel call gives it (the
// engine's earlier host path), greedy rows included (temperature 0: the argmax).
TEST(TokenSelection, CpuSampleIsTheSamplerRowByRow) {
  const int64_t rows = 12, vocab = 5003;
  std::vector<float> logits = trickyLogits(rows, vocab, 3);
  std::vector<repops::SamplingParams> params = samplingParams(rows);
  TokenSelection select;
  ASSERT_EQ(select.startSample(
                Tensor::wrap(logits.data(), Device::cpu(), DType::kF32, {rows, vocab}), params),
            Status::kSuccess)
      << lastErrorMessage();
  std::vector<int32_t> tokens;
  ASSERT_EQ(select.wait(&tokens), Status::kSuccess);
  const std::vector<int32_t> greedy = referenceArgmax(logits, rows, vocab);
  for (int64_t r = 0; r < rows; ++r) {
    int32_t one = -1;
    ASSERT_EQ(repops::cpu::sample(logits.data() + r * vocab, 1, vocab, &params[r], &one),
              Status::kSuccess);
    EXPECT_EQ(tokens[r], one) << "row " << r;
    if (params[r].temperature == 0.0f) {
      EXPECT_EQ(tokens[r], greedy[r]) << "row " << r;
    }
  }
  EXPECT_EQ(
      select.startSample(Tensor::wrap(logits.data(), Device::cpu(), DType::kF32, {rows, vocab}),
                         std::vector<repops::SamplingParams>(3)),
      Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("sampling parameters"), std::string::npos);
}

TEST(TokenSelection, EachStartReplacesTheLastRows) {
  TokenSelection select;
  std::vector<int32_t> tokens;
  EXPECT_EQ(select.wait(&tokens), Status::kInvalidArgument);  // no start yet
  EXPECT_EQ(select.ids(), nullptr);
  std::vector<float> many = trickyLogits(6, 50, 1), one = trickyLogits(1, 50, 2);
  ASSERT_EQ(select.startArgmax(Tensor::wrap(many.data(), Device::cpu(), DType::kF32, {6, 50})),
            Status::kSuccess);
  ASSERT_EQ(select.startArgmax(Tensor::wrap(one.data(), Device::cpu(), DType::kF32, {1, 50})),
            Status::kSuccess);
  ASSERT_EQ(select.wait(&tokens), Status::kSuccess);
  EXPECT_EQ(tokens, referenceArgmax(one, 1, 50));
  EXPECT_EQ(select.rows(), 1);
}

TEST(TokenSelection, RejectsLogitsThatAreNotFp32Rows) {
  std::vector<float> flat(10);
  std::vector<uint16_t> half(10);
  TokenSelection select;
  EXPECT_EQ(select.startArgmax(Tensor::wrap(flat.data(), Device::cpu(), DType::kF32, {10})),
            Status::kInvalidArgument);
  EXPECT_EQ(select.startArgmax(Tensor::wrap(half.data(), Device::cpu(), DType::kBF16, {2, 5})),
            Status::kInvalidArgument);
  EXPECT_EQ(select.startSample(Tensor::wrap(flat.data(), Device::cpu(), DType::kF32, {0, 10}), {}),
            Status::kInvalidArgument);
  // An empty vocabulary: no token to choose (and no division by it when chunking rows).
  EXPECT_EQ(select.startArgmax(Tensor::wrap(flat.data(), Device::cpu(), DType::kF32, {2, 0})),
            Status::kInvalidArgument);
  EXPECT_NE(std::string(lastErrorMessage()).find("vocab >= 1"), std::string::npos);
  EXPECT_NE(std::string(lastErrorMessage()).find("TokenSelection"), std::string::npos);
}

}  // namespace
}  // namespace ree
