// core/include/ree/core/log.h: one "[ree] " line on stderr per message, filtered by the level.
#include "ree/core/log.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace ree {
namespace {

std::string logged(LogLevel level, const char* text) {
  ::testing::internal::CaptureStderr();
  logMessage(level, "%s", text);
  return ::testing::internal::GetCapturedStderr();
}

// First in the file: the level is read from REE_LOG_LEVEL once, on first use.
TEST(Log, DefaultLevelIsWarningWithoutTheEnvironmentVariable) {
  if (std::getenv("REE_LOG_LEVEL") != nullptr) GTEST_SKIP() << "REE_LOG_LEVEL is set";
  EXPECT_EQ(logLevel(), LogLevel::kWarning);
}

TEST(Log, MessageIsOneLinePrefixed) {
  setLogLevel(LogLevel::kWarning);
  ::testing::internal::CaptureStderr();
  logMessage(LogLevel::kWarning, "layer %d took %.1f ms", 3, 2.5);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "[ree] layer 3 took 2.5 ms\n");
}

TEST(Log, LevelsAboveTheCurrentOneAreDropped) {
  setLogLevel(LogLevel::kWarning);
  EXPECT_EQ(logLevel(), LogLevel::kWarning);
  EXPECT_EQ(logged(LogLevel::kError, "e"), "[ree] e\n");
  EXPECT_EQ(logged(LogLevel::kWarning, "w"), "[ree] w\n");
  EXPECT_EQ(logged(LogLevel::kInfo, "i"), "");
  EXPECT_EQ(logged(LogLevel::kDebug, "d"), "");
  setLogLevel(LogLevel::kDebug);
  EXPECT_EQ(logged(LogLevel::kDebug, "d"), "[ree] d\n");
  setLogLevel(LogLevel::kError);
  EXPECT_EQ(logged(LogLevel::kWarning, "w"), "");
  EXPECT_EQ(logged(LogLevel::kError, "e"), "[ree] e\n");
  setLogLevel(LogLevel::kWarning);
}

TEST(Log, LongMessagesAreTruncatedToOneLine) {
  setLogLevel(LogLevel::kWarning);
  const std::string out = logged(LogLevel::kWarning, std::string(10000, 'x').c_str());
  EXPECT_EQ(out.rfind("[ree] xxx", 0), 0u);
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(out.find('\n'), out.size() - 1);
  EXPECT_LT(out.size(), 2100u);
}

}  // namespace
}  // namespace ree
