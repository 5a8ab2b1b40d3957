// PendingCopy and TokenSelection on a GPU: the copy completes when waited for, and the tokens
// selected on the device (argmax and sampling) are the CPU's (and torch.argmax's) for every row.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
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

Status upload(std::vector<float>& values, std::vector<int64_t> shape, Tensor* out) {
  return toDevice(Tensor::wrap(values.data(), Device::cpu(), DType::kF32, std::move(shape)),
                  Device::cuda(0), out);
}

TEST(PendingCopy, GpuBytesArriveWhenWaitedFor) {
  REE_SKIP_WITHOUT_GPU();
  const int64_t rows = 64, cols = 128256;  // a batch-64 step's logits at a 128k vocabulary
  std::vector<float> src = tensor_test::pattern(rows, cols);
  Tensor device, pinned;
  ASSERT_EQ(upload(src, {rows, cols}, &device), Status::kSuccess) << lastErrorMessage();
  ASSERT_EQ(Tensor::pinnedHost(DType::kF32, {rows * cols}, &pinned), Status::kSuccess);
  std::memset(pinned.data(), 0xff, pinned.nbytes());  // poison: every byte must be written
  PendingCopy copy;
  ASSERT_EQ(PendingCopy::start(device, pinned, &copy), Status::kSuccess) << lastErrorMessage();
  ASSERT_EQ(copy.wait(), Status::kSuccess) << lastErrorMessage();
  EXPECT_FALSE(copy.pending());
  EXPECT_EQ(std::memcmp(pinned.data(), src.data(), pinned.nbytes()), 0);
  // Moved and destroyed while in flight: the destructor waits, the moved-from copy is empty.
  std::memset(pinned.data(), 0xff, pinned.nbytes());
  {
    PendingCopy first;
    ASSERT_EQ(PendingCopy::start(device, pinned, &first), Status::kSuccess);
    PendingCopy second = std::move(first);
    EXPECT_FALSE(first.pending());
  }
  EXPECT_EQ(std::memcmp(pinned.data(), src.data(), pinned.nbytes()), 0);
}

TEST(TokenSelection, GpuSelectsTheCpuTokenOfEveryRow) {
  REE_SKIP_WITHOUT_GPU();
  for (int64_t vocab : {7, 1000, 32769, 128256}) {
    for (int64_t rows : {1, 6, 64}) {
      std::vector<float> logits = trickyLogits(rows, vocab, static_cast<uint32_t>(vocab + rows));
      Tensor device;
      ASSERT_EQ(upload(logits, {rows, vocab}, &device), Status::kSuccess) << lastErrorMessage();
      const Tensor host = Tensor::wrap(logits.data(), Device::cpu(), DType::kF32, {rows, vocab});
      const std::vector<repops::SamplingParams> params = samplingParams(rows);
      const std::string where = std::to_string(rows) + " x " + std::to_string(vocab);
      for (bool sampled : {false, true}) {
        TokenSelection gpu, cpu;
        std::vector<int32_t> got, want;
        ASSERT_EQ(sampled ? gpu.startSample(device, params) : gpu.startArgmax(device),
                  Status::kSuccess)
            << lastErrorMessage();
        ASSERT_EQ(gpu.wait(&got), Status::kSuccess) << lastErrorMessage();
        ASSERT_EQ(sampled ? cpu.startSample(host, params) : cpu.startArgmax(host),
                  Status::kSuccess);
        ASSERT_EQ(cpu.wait(&want), Status::kSuccess);
        EXPECT_EQ(got, want) << where << (sampled ? " sampled" : " argmax");
        if (!sampled) {
          EXPECT_EQ(got, referenceArgmax(logits, rows, vocab)) << where;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ree
