// The stage transports with device tensors under mpirun -n 2, one GPU per rank: the NCCL
// transport (activations GPU to GPU, forward link 0 -> 1) and the MPI transport with CUDA tensors
// (staged through host memory, both directions). Payloads are deterministic byte patterns the
// receiver regenerates and compares with memcmp. Skips on every rank (decided collectively) when
// a rank has no GPU of its own.
#include <cuda_runtime.h>
#include <mpi.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mpi_test_main.h"
#include "ree/comm/transports.h"
#include "ree/core/device.h"
#include "transport_test_util.h"

namespace ree::comm {
namespace {

using Clock = std::chrono::steady_clock;

using test::pattern;

MpiWorld world() {
  MpiWorld w;
  EXPECT_EQ(initMpi(nullptr, nullptr, &w), Status::kSuccess) << lastErrorMessage();
  return w;
}

// Same decision on every rank: each rank needs a GPU of its own on its host.
bool everyRankHasAGpu(std::string* why) {
  MpiWorld w = world();
  int devices = cudaDeviceCount();
  int min_spare = 0;
  int spare = devices - w.local_size;
  MPI_Allreduce(&spare, &min_spare, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (min_spare < 0) {
    *why = "needs one GPU per rank: " + std::to_string(w.local_size) + " ranks on a host with " +
           std::to_string(devices) + " GPU(s)";
    return false;
  }
  return true;
}

// A device tensor holding pattern(seed); device work finished on return.
Tensor patternTensor(Device device, uint64_t seed, DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  EXPECT_EQ(Tensor::empty(device, dtype, shape, &t), Status::kSuccess) << lastErrorMessage();
  std::vector<uint8_t> bytes = pattern(seed, t.nbytes());
  EXPECT_EQ(copyTensor(Tensor::wrap(bytes.data(), Device::cpu(), dtype, shape), t),
            Status::kSuccess)
      << lastErrorMessage();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return t;
}

// A device tensor of `shape` filled with 0xFF bytes (so that a missing transfer shows).
Tensor poisonedTensor(Device device, DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  EXPECT_EQ(Tensor::empty(device, dtype, shape, &t), Status::kSuccess) << lastErrorMessage();
  if (t.nbytes() > 0) {
    EXPECT_EQ(cudaMemset(t.data(), 0xFF, t.nbytes()), cudaSuccess);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return t;
}

bool tensorHasPattern(const Tensor& t, uint64_t seed) {
  std::vector<uint8_t> got(t.nbytes());
  EXPECT_EQ(copyTensor(t, Tensor::wrap(got.data(), Device::cpu(), t.dtype(), t.shape())),
            Status::kSuccess)
      << lastErrorMessage();
  std::vector<uint8_t> expected = pattern(seed, t.nbytes());
  return got.empty() || std::memcmp(got.data(), expected.data(), got.size()) == 0;
}

class GpuStageTransportTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    std::string why;
    if (!everyRankHasAGpu(&why)) GTEST_SKIP() << why;
    if (std::string(GetParam()) == "nccl" && !ncclTransportAvailable()) {
      GTEST_SKIP() << "this build has no NCCL";
    }
    MpiWorld w = world();
    ASSERT_EQ(w.size, 2) << "run under mpirun -n 2";
    device_ = Device::cuda(w.local_rank);
    ASSERT_EQ(cudaSetDevice(device_.index), cudaSuccess);
    transport_ = make(60.0);
    ASSERT_NE(transport_, nullptr);
    ASSERT_EQ(transport_->device(), device_);
    ASSERT_STREQ(transport_->name(), GetParam());
  }
  void TearDown() override {
    transport_.reset();
    MPI_Barrier(MPI_COMM_WORLD);
  }

  std::unique_ptr<StageTransport> make(double timeout_s) {
    std::unique_ptr<StageTransport> t;
    Status status = std::string(GetParam()) == "nccl"
                        ? createNcclTransport(world(), device_.index, timeout_s, &t)
                        : createMpiTransport(world(), device_, timeout_s, &t);
    EXPECT_EQ(status, Status::kSuccess) << lastErrorMessage();
    return t;
  }
  bool isNccl() const { return std::string(GetParam()) == "nccl"; }

  Device device_;
  std::unique_ptr<StageTransport> transport_;
};

TEST_P(GpuStageTransportTest, TensorsOfEveryDtypeAreBitwise) {
  StageTransport& t = *transport_;
  struct Case {
    DType dtype;
    std::vector<int64_t> shape;
  };
  const std::vector<Case> cases = {{DType::kF32, {7, 33}},
                                   {DType::kBF16, {1, 4096}},
                                   {DType::kF16, {3, 5, 11}},
                                   {DType::kBF16, {1}},
                                   {DType::kF32, {4099, 1027}}};  // ~16 MiB, odd size
  if (t.rank() == 0) {
    // The tensors are temporaries: the transport must keep their storage alive.
    for (size_t i = 0; i < cases.size(); ++i) {
      ASSERT_EQ(t.sendTensor(1, patternTensor(device_, 100 + i, cases[i].dtype, cases[i].shape)),
                Status::kSuccess)
          << lastErrorMessage();
    }
    EXPECT_EQ(t.flush(), Status::kSuccess) << lastErrorMessage();
  } else {
    for (size_t i = 0; i < cases.size(); ++i) {
      Tensor got = poisonedTensor(device_, cases[i].dtype, cases[i].shape);
      ASSERT_EQ(t.recvTensor(0, got), Status::kSuccess) << lastErrorMessage();
      EXPECT_TRUE(tensorHasPattern(got, 100 + i)) << "tensor " << i << " " << got.describe();
    }
  }
  if (isNccl()) return;  // the NCCL transport links stage r to r + 1 only
  if (t.rank() == 1) {
    ASSERT_EQ(t.sendTensor(0, patternTensor(device_, 999, DType::kBF16, {33, 65})),
              Status::kSuccess)
        << lastErrorMessage();
    EXPECT_EQ(t.flush(), Status::kSuccess) << lastErrorMessage();
  } else {
    Tensor got = poisonedTensor(device_, DType::kBF16, {33, 65});
    ASSERT_EQ(t.recvTensor(1, got), Status::kSuccess) << lastErrorMessage();
    EXPECT_TRUE(tensorHasPattern(got, 999));
  }
}

// The pipeline's pattern: header message then tensor, many steps in flight; results go back to
// rank 0 as messages at the same time.
TEST_P(GpuStageTransportTest, HeadersTensorsAndResultsKeepTheirOrder) {
  StageTransport& t = *transport_;
  const int kSteps = 100;
  auto rowsOf = [](int step) { return 1 + (step * 13) % 61; };
  if (t.rank() == 0) {
    for (int i = 0; i < kSteps; ++i) {
      int64_t rows = rowsOf(i);
      std::vector<uint8_t> header(12);
      std::memcpy(header.data(), &i, 4);
      std::memcpy(header.data() + 4, &rows, 8);
      ASSERT_EQ(t.sendMessage(1, 1, header), Status::kSuccess) << lastErrorMessage();
      ASSERT_EQ(t.sendTensor(1, patternTensor(device_, 5000 + i, DType::kBF16, {rows, 256})),
                Status::kSuccess)
          << lastErrorMessage();
      if (i >= 4) {
        std::vector<uint8_t> result;
        ASSERT_EQ(t.recvMessage(1, 2, &result), Status::kSuccess) << lastErrorMessage();
        ASSERT_EQ(result, pattern(8000 + i - 4, 40)) << "result of step " << i - 4;
      }
    }
    for (int j = kSteps - 4; j < kSteps; ++j) {
      std::vector<uint8_t> result;
      ASSERT_EQ(t.recvMessage(1, 2, &result), Status::kSuccess) << lastErrorMessage();
      ASSERT_EQ(result, pattern(8000 + j, 40)) << "result of step " << j;
    }
  } else {
    for (int i = 0; i < kSteps; ++i) {
      std::vector<uint8_t> header;
      ASSERT_EQ(t.recvMessage(0, 1, &header), Status::kSuccess) << lastErrorMessage();
      ASSERT_EQ(header.size(), 12u);
      int step = -1;
      int64_t rows = -1;
      std::memcpy(&step, header.data(), 4);
      std::memcpy(&rows, header.data() + 4, 8);
      ASSERT_EQ(step, i);
      ASSERT_EQ(rows, rowsOf(i));
      Tensor hidden = poisonedTensor(device_, DType::kBF16, {rows, 256});
      ASSERT_EQ(t.recvTensor(0, hidden), Status::kSuccess) << lastErrorMessage();
      ASSERT_TRUE(tensorHasPattern(hidden, 5000 + i)) << "step " << i;
      ASSERT_EQ(t.sendMessage(0, 2, pattern(8000 + i, 40)), Status::kSuccess);
    }
  }
  EXPECT_EQ(t.flush(), Status::kSuccess) << lastErrorMessage();
}

// Both ranks send 16 MiB messages (and rank 0 16 MiB tensors) before receiving anything. The
// tensors are made first: the helper's device synchronisation would otherwise wait for the
// previous NCCL send, which only completes once the receiver takes it.
TEST_P(GpuStageTransportTest, SendsNeverWaitForTheReceiver) {
  StageTransport& t = *transport_;
  const int kCount = 4;
  const int64_t kFloats = int64_t{4} << 20;  // 16 MiB
  int peer = 1 - t.rank();
  std::vector<Tensor> outgoing;
  if (t.rank() == 0) {
    for (int i = 0; i < kCount; ++i)
      outgoing.push_back(patternTensor(device_, 300 + i, DType::kF32, {kFloats}));
  }
  std::vector<Tensor> incoming;
  if (t.rank() == 1) {
    for (int i = 0; i < kCount; ++i)
      incoming.push_back(poisonedTensor(device_, DType::kF32, {kFloats}));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  auto start = Clock::now();
  for (int i = 0; i < kCount; ++i) {
    ASSERT_EQ(t.sendMessage(peer, 3, pattern(t.rank() * 100 + i, kFloats * 4)), Status::kSuccess)
        << lastErrorMessage();
    if (t.rank() == 0) {
      ASSERT_EQ(t.sendTensor(1, outgoing[i]), Status::kSuccess) << lastErrorMessage();
    }
  }
  // Every send returned without a receiver (which only starts after this).
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
  outgoing.clear();  // the transport keeps the storage until the sends complete
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int i = 0; i < kCount; ++i) {
    std::vector<uint8_t> got;
    ASSERT_EQ(t.recvMessage(peer, 3, &got), Status::kSuccess) << lastErrorMessage();
    EXPECT_TRUE(got == pattern(peer * 100 + i, kFloats * 4)) << "message " << i;
    if (t.rank() == 1) {
      ASSERT_EQ(t.recvTensor(0, incoming[i]), Status::kSuccess) << lastErrorMessage();
    }
  }
  for (int i = 0; i < static_cast<int>(incoming.size()); ++i)
    EXPECT_TRUE(tensorHasPattern(incoming[i], 300 + i)) << "tensor " << i;
  EXPECT_EQ(t.flush(), Status::kSuccess) << lastErrorMessage();
}

TEST_P(GpuStageTransportTest, AgreeAndAllGatherWork) {
  StageTransport& t = *transport_;
  Status local = t.rank() == 1 ? Status::kCudaError : Status::kSuccess;
  EXPECT_EQ(t.agree(local, t.rank() == 1 ? "kernel launch failed" : ""), Status::kCudaError);
  EXPECT_STREQ(lastErrorMessage(), "rank 1: kernel launch failed");
  std::vector<std::vector<uint8_t>> all;
  ASSERT_EQ(t.allGather(pattern(t.rank(), 10 + t.rank()), &all), Status::kSuccess)
      << lastErrorMessage();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0], pattern(0, 10));
  EXPECT_EQ(all[1], pattern(1, 11));
}

// Runs last: rank 1 waits for a tensor rank 0 never sends.
TEST_P(GpuStageTransportTest, ZTimeoutWaitingForATensorNamesThePeer) {
  transport_.reset();  // a transport with a short deadline instead
  MPI_Barrier(MPI_COMM_WORLD);
  std::unique_ptr<StageTransport> t = make(2.0);
  ASSERT_NE(t, nullptr);
  if (t->rank() == 1) {
    Tensor tensor = poisonedTensor(device_, DType::kF32, {1024});
    auto start = Clock::now();
    EXPECT_EQ(t->recvTensor(0, tensor), Status::kTimeout);
    double waited = std::chrono::duration<double>(Clock::now() - start).count();
    std::string message = lastErrorMessage();
    EXPECT_GE(waited, 2.0);
    EXPECT_LE(waited, 8.0);
    EXPECT_EQ(message.rfind("rank 1: ", 0), 0u) << message;
    EXPECT_NE(message.find("rank 0"), std::string::npos) << message;
    start = Clock::now();
    EXPECT_NE(t->recvTensor(0, tensor), Status::kSuccess);
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 0.5);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, GpuStageTransportTest, ::testing::Values("mpi", "nccl"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace ree::comm

REE_MPI_TEST_MAIN()
