// The ATen operation sets on a CUDA GPU (skipped without one): the deterministic set gives the
// same bits run to run, and both sets agree with the CPU deterministic set within a tolerance.
#include "aten_ops_test_common.h"

namespace ree {
namespace {

using namespace aten_test;

// ---- CUDA (skipped without a GPU) ---------------------------------------------------------------

TEST(AtenGpu, DeterministicRunsGiveIdenticalBitsAndMatchTheCpu) {
  REE_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    std::unique_ptr<OperationSet> gpu;
    Status status = createOperationSet(OperationSetKind::kDeterministic, Device::cuda(0), &gpu);
    if (status == Status::kUnsupported) GTEST_SKIP() << lastErrorMessage();
    ASSERT_EQ(status, Status::kSuccess) << lastErrorMessage();
    std::vector<unsigned char> first = runEveryOperator(*gpu, dtype);
    // A default-set run in between must not disturb the deterministic one.
    std::unique_ptr<OperationSet> fast;
    ASSERT_EQ(createOperationSet(OperationSetKind::kDefault, Device::cuda(0), &fast),
              Status::kSuccess)
        << lastErrorMessage();
    std::vector<unsigned char> fast_bytes = runEveryOperator(*fast, dtype);
    std::vector<unsigned char> second = runEveryOperator(*gpu, dtype);
    ASSERT_EQ(first.size(), second.size());
    EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size()), 0) << dtypeName(dtype);
    // Against the CPU deterministic set: different kernels, so a loose tolerance that still
    // catches layout, stream, mask or dtype mistakes.
    std::unique_ptr<OperationSet> cpu = createSet(OperationSetKind::kDeterministic);
    ASSERT_NE(cpu, nullptr);
    std::vector<unsigned char> on_cpu = runEveryOperator(*cpu, dtype);
    ASSERT_EQ(on_cpu.size(), first.size());
    auto decode = [&](const std::vector<unsigned char>& raw) {
      Tensor t = Tensor::wrap(const_cast<unsigned char*>(raw.data()), Device::cpu(), dtype,
                              {static_cast<int64_t>(raw.size() / dtypeSize(dtype))});
      return readTensor(t);
    };
    std::vector<double> cpu_values = decode(on_cpu);
    std::vector<double> tolerance(cpu_values.size());
    const double relative = dtype == DType::kF32 ? 1e-3 : 5e-2;
    for (size_t i = 0; i < tolerance.size(); ++i) {
      tolerance[i] = relative * (std::fabs(cpu_values[i]) + 1.0);
    }
    expectClose(decode(first), cpu_values, tolerance,
                std::string("deterministic cuda vs cpu ") + dtypeName(dtype));
    expectClose(decode(fast_bytes), cpu_values, tolerance,
                std::string("default cuda vs cpu ") + dtypeName(dtype));
  }
}

// The default set's attention on a GPU (one FlashAttention varlen call over the slot cache for
// bf16/fp16) against the CPU deterministic set, per-sequence SDPA, on steps that mix prefills,
// chunks after cached tokens, decodes and empty sequences in scattered slots. The caches must be
// bitwise equal (appends are copies); the outputs within a bf16 tolerance that still catches a
// wrong mask, slot or row (those move outputs by ~0.1).
TEST(AtenGpu, DefaultAttentionOnMixedStepsMatchesTheCpu) {
  REE_SKIP_WITHOUT_GPU();
  for (int64_t d : {64, 128}) {
    for (DType dtype : {DType::kBF16, DType::kF32}) {
      std::unique_ptr<OperationSet> gpu;
      Status status = createOperationSet(OperationSetKind::kDefault, Device::cuda(0), &gpu);
      if (status == Status::kUnsupported) GTEST_SKIP() << lastErrorMessage();
      ASSERT_EQ(status, Status::kSuccess) << lastErrorMessage();
      std::unique_ptr<OperationSet> cpu = createSet(OperationSetKind::kDeterministic);
      ASSERT_NE(cpu, nullptr);
      std::vector<unsigned char> on_gpu = runAttentionSteps(*gpu, dtype, d);
      std::vector<unsigned char> on_cpu = runAttentionSteps(*cpu, dtype, d);
      ASSERT_EQ(on_gpu.size(), on_cpu.size());
      const size_t cache_bytes = 2 * 4 * 48 * 2 * d * dtypeSize(dtype);
      const size_t out_bytes = on_cpu.size() - cache_bytes;
      EXPECT_EQ(std::memcmp(on_gpu.data() + out_bytes, on_cpu.data() + out_bytes, cache_bytes), 0)
          << "caches differ, d=" << d << " " << dtypeName(dtype);
      auto decode = [&](const std::vector<unsigned char>& raw) {
        Tensor t = Tensor::wrap(const_cast<unsigned char*>(raw.data()), Device::cpu(), dtype,
                                {static_cast<int64_t>(out_bytes / dtypeSize(dtype))});
        return readTensor(t);
      };
      std::vector<double> expected = decode(on_cpu);
      const double tolerance = dtype == DType::kF32 ? 1e-4 : 2e-2;
      expectClose(decode(on_gpu), expected, std::vector<double>(expected.size(), tolerance),
                  "default cuda attention d=" + std::to_string(d) + " " + dtypeName(dtype));
    }
  }
}

}  // namespace
}  // namespace ree
