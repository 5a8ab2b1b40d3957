// Deliberate verdicts under mpirun for the self-check of the test registration (tests/selfcheck).
#include <gtest/gtest.h>
#include <mpi.h>

#include "mpi_test_main.h"

namespace {

int rank() {
  int value = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &value);
  return value;
}

TEST(SelfcheckMpi, FailsOnRankOneOnly) {
  EXPECT_NE(rank(), 1) << "deliberately failing on rank 1";
}

TEST(SelfcheckMpi, SkipsOnEveryRank) {
  GTEST_SKIP() << "deliberately skipped";
}

TEST(SelfcheckMpi, PassesOnRankZeroOnly) {
  if (rank() != 0) GTEST_SKIP() << "deliberately skipped on rank " << rank();
  EXPECT_EQ(rank(), 0);
}

}  // namespace

REE_MPI_TEST_MAIN()
