// main() for GoogleTest suites launched under mpirun: initialise MPI before the tests, finalise
// after, and fail the job on every rank if any rank failed (so ctest sees one verdict). Every rank
// prints its own results, so a failure on rank 1 is visible too.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#define REE_MPI_TEST_MAIN()                                                         \
  int main(int argc, char** argv) {                                                 \
    ::testing::InitGoogleTest(&argc, argv);                                         \
    int provided = 0;                                                               \
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);                  \
    int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;                                \
    int any_failed = 0;                                                             \
    MPI_Allreduce(&local_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD); \
    MPI_Finalize();                                                                 \
    return any_failed;                                                              \
  }
