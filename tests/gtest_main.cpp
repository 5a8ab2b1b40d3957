// main() of every REE GoogleTest executable not run under mpirun (cmake/ReeTesting.cmake links it):
// GoogleTest's own main, but the exit code says "skipped" only when nothing failed
// (gtest_verdict.h).
#include "gtest_verdict.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return ::ree::test::testVerdict(RUN_ALL_TESTS());
}
