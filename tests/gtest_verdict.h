// The exit code of every REE test executable, from GoogleTest's results: ctest reads it
// (SKIP_RETURN_CODE), never the printed text, so a failing case can never be reported as a skip.
//   1                     a case failed (or a global set-up/tear-down failed), or no case ran;
//   kReeTestSkipExitCode  no case failed and every case that ran was skipped (GTEST_SKIP);
//   0                     otherwise: at least one case passed and none failed.
// "No case ran" is a failure: a filter or registration that selects nothing must not look green.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>

namespace ree::test {

// Must equal REE_TEST_SKIP_RETURN_CODE in cmake/ReeTesting.cmake (the autotools convention).
constexpr int kReeTestSkipExitCode = 77;

// The verdict of this process after RUN_ALL_TESTS() returned `run_all_tests_result`.
inline int testVerdict(int run_all_tests_result) {
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  if (run_all_tests_result != 0 || unit.failed_test_count() > 0 || unit.Failed()) return 1;
  if (GTEST_FLAG_GET(list_tests)) return 0;
  const int ran = unit.test_to_run_count();
  if (ran == 0) {
    std::fprintf(stderr,
                 "[  REE     ] no test case ran: a filter or registration selects nothing\n");
    return 1;
  }
  if (unit.skipped_test_count() == ran) {
    std::fprintf(stderr,
                 "[  REE     ] every case that ran was skipped: exit code %d (ctest: Skipped)\n",
                 kReeTestSkipExitCode);
    return kReeTestSkipExitCode;
  }
  return 0;
}

}  // namespace ree::test
