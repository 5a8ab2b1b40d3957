// main() for GoogleTest suites launched under mpirun: initialise MPI before the tests, finalise
// after, and give every rank the same verdict (so mpirun, and ctest, see one): 1 when a case failed
// on any rank, the skip code (gtest_verdict.h) when every case that ran on every rank was skipped,
// else 0. Every rank prints its own results, so a failure on rank 1 is visible too. Listing the
// cases (--gtest_list_tests, for per-case registration) needs no MPI.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include "gtest_verdict.h"

namespace ree::test {

inline int mpiTestMain(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (GTEST_FLAG_GET(list_tests)) return testVerdict(RUN_ALL_TESTS());
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  const int local = testVerdict(RUN_ALL_TESTS());
  const int local_failed = local != 0 && local != kReeTestSkipExitCode ? 1 : 0;
  const int local_all_skipped = local == kReeTestSkipExitCode ? 1 : 0;
  int any_failed = 0;
  int all_skipped = 0;
  MPI_Allreduce(&local_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&local_all_skipped, &all_skipped, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Finalize();
  if (any_failed != 0) return 1;
  return all_skipped != 0 ? kReeTestSkipExitCode : 0;
}

}  // namespace ree::test

#define REE_MPI_TEST_MAIN()                      \
  int main(int argc, char** argv) {              \
    return ::ree::test::mpiTestMain(argc, argv); \
  }
