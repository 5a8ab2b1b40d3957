// MPI bootstrap under mpirun -n 2: ranks, node-local ranks, and a host byte exchange.
#include <mpi.h>

#include <vector>

#include "mpi_test_main.h"
#include "ree/comm/mpi_world.h"

namespace ree::comm {
namespace {

TEST(MpiWorld, RanksAndLocalRanks) {
  MpiWorld world;
  ASSERT_EQ(initMpi(nullptr, nullptr, &world), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(world.size, 2);
  EXPECT_GE(world.rank, 0);
  EXPECT_LT(world.rank, world.size);
  // Both ranks run on this host in CI, so the local numbering equals the global one.
  EXPECT_EQ(world.local_size, 2);
  EXPECT_EQ(world.local_rank, world.rank);
}

TEST(MpiWorld, HostBufferArrivesBitwise) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<unsigned> data(1 << 16);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<unsigned>(i * 2654435761u);
  if (rank == 0) {
    ASSERT_EQ(
        MPI_Send(data.data(), static_cast<int>(data.size()), MPI_UNSIGNED, 1, 7, MPI_COMM_WORLD),
        MPI_SUCCESS);
  } else {
    std::vector<unsigned> got(data.size(), 0);
    ASSERT_EQ(MPI_Recv(got.data(), static_cast<int>(got.size()), MPI_UNSIGNED, 0, 7, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE),
              MPI_SUCCESS);
    EXPECT_EQ(got, data);
  }
}

}  // namespace
}  // namespace ree::comm

REE_MPI_TEST_MAIN()
