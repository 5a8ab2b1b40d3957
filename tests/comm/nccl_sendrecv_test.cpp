// NCCL point-to-point on 2 GPUs under mpirun -n 2: rank 0 sends a tensor of random bits (NaN
// payloads, denormals and -0 included), rank 1 receives it and compares bitwise with the same
// pattern generated locally. Skips on every rank when fewer than 2 GPUs are visible.
#include <cuda_runtime.h>
#include <mpi.h>

#include <random>
#include <vector>

#include "mpi_test_main.h"
#include "ree/comm/nccl_peer.h"
#include "ree/core/device.h"

namespace ree::comm {
namespace {

std::vector<uint32_t> pattern(size_t n) {
  std::mt19937 rng(1234);
  std::vector<uint32_t> v(n);
  for (auto& x : v)
    x = rng();
  v[0] = 0x7fc01234u;  // NaN with payload
  v[1] = 0x00000001u;  // smallest denormal
  v[2] = 0x80000000u;  // -0
  return v;
}

TEST(NcclPeer, SendRecvIsBitwise) {
  MpiWorld world;
  ASSERT_EQ(initMpi(nullptr, nullptr, &world), Status::kSuccess) << lastErrorMessage();
  int devices = cudaDeviceCount();
  int min_devices = 0;
  MPI_Allreduce(&devices, &min_devices, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (min_devices < world.local_size) {
    GTEST_SKIP() << "needs one GPU per rank: " << world.local_size << " ranks, " << min_devices
                 << " GPU(s) visible";
  }
  ASSERT_EQ(world.size, 2);
  NcclPeer peer;
  ASSERT_EQ(peer.init(world, world.local_rank, 60.0), Status::kSuccess) << lastErrorMessage();

  const size_t n = (64u << 20) / 4 + 3;  // 64 MiB + 12 bytes: not a multiple of any chunk size
  std::vector<uint32_t> expected = pattern(n);
  uint32_t* device_buffer = nullptr;
  ASSERT_EQ(cudaMalloc(&device_buffer, n * 4), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  if (world.rank == 0) {
    ASSERT_EQ(cudaMemcpy(device_buffer, expected.data(), n * 4, cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(peer.send(device_buffer, n * 4, 1, stream), Status::kSuccess) << lastErrorMessage();
  } else {
    ASSERT_EQ(cudaMemset(device_buffer, 0xff, n * 4), cudaSuccess);
    ASSERT_EQ(peer.recv(device_buffer, n * 4, 0, stream), Status::kSuccess) << lastErrorMessage();
  }
  ASSERT_EQ(peer.wait(stream, 60.0, "send/recv of 64 MiB"), Status::kSuccess) << lastErrorMessage();
  if (world.rank == 1) {
    std::vector<uint32_t> got(n);
    ASSERT_EQ(cudaMemcpy(got.data(), device_buffer, n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    size_t differing = 0;
    for (size_t i = 0; i < n; ++i)
      differing += got[i] != expected[i];
    EXPECT_EQ(differing, 0u) << "words differing after NCCL transfer";
    std::printf("rank 1 received %zu bytes from rank 0 over NCCL: %zu words differ\n", n * 4,
                differing);
  }
  cudaStreamDestroy(stream);
  cudaFree(device_buffer);
}

}  // namespace
}  // namespace ree::comm

REE_MPI_TEST_MAIN()
