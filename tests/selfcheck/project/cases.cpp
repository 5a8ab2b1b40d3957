// Deliberate verdicts for the self-check of the test registration (tests/selfcheck).
#include <gtest/gtest.h>

TEST(Selfcheck, Passes) {
  EXPECT_EQ(1 + 1, 2);
}

TEST(Selfcheck, Skips) {
  GTEST_SKIP() << "deliberately skipped";
}

TEST(Selfcheck, Fails) {
  ADD_FAILURE() << "deliberately failing";
}

// Prints "[  SKIPPED ]" and "[  FAILED  ]": a failure, whatever the text says.
TEST(Selfcheck, FailsThenSkips) {
  ADD_FAILURE() << "deliberately failing before a skip";
  GTEST_SKIP() << "skipped after a failure";
}

// Disabled: listed but never run, whole or per case (where ctest shows it as disabled).
TEST(Selfcheck, DISABLED_NeverRuns) {
  ADD_FAILURE() << "a disabled case ran";
}
