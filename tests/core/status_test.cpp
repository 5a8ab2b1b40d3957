// core/include/ree/core/status.h: status names and the last-error message format.
#include "ree/core/status.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace ree {
namespace {

TEST(StatusName, EveryStatusHasItsStableName) {
  EXPECT_STREQ(statusName(Status::kSuccess), "success");
  EXPECT_STREQ(statusName(Status::kInvalidArgument), "invalid-argument");
  EXPECT_STREQ(statusName(Status::kUnsupported), "unsupported");
  EXPECT_STREQ(statusName(Status::kCudaError), "cuda-error");
  EXPECT_STREQ(statusName(Status::kOutOfMemory), "out-of-memory");
  EXPECT_STREQ(statusName(Status::kIoError), "io-error");
  EXPECT_STREQ(statusName(Status::kCommError), "comm-error");
  EXPECT_STREQ(statusName(Status::kTimeout), "timeout");
  EXPECT_STREQ(statusName(Status::kMismatch), "mismatch");
  EXPECT_STREQ(statusName(Status::kInternal), "internal");
  EXPECT_STREQ(statusName(static_cast<Status>(1234)), "unknown");
}

TEST(SetError, MessageNamesTheSourceBelowTheRepositoryAndTheStatus) {
  clearError();
  EXPECT_STREQ(lastErrorMessage(), "");
  Status status = setError(Status::kInvalidArgument, "/home/x/ree/kernels/src/cpu/linear.cpp", 42,
                           "linear: k=%d must be positive", -3);
  EXPECT_EQ(status, Status::kInvalidArgument);
  EXPECT_STREQ(lastErrorMessage(),
               "linear: k=-3 must be positive (kernels/src/cpu/linear.cpp:42) [invalid-argument]");
}

TEST(SetError, FileOutsideTheKnownFoldersKeepsItsWholePath) {
  setError(Status::kIoError, "/elsewhere/tool.cpp", 7, "bad");
  EXPECT_STREQ(lastErrorMessage(), "bad (/elsewhere/tool.cpp:7) [io-error]");
}

TEST(SetError, WithoutAFileTheMessageIsKeptAsItIs) {
  Status status = setError(Status::kCommError, nullptr, 0, "rank %d: peer lost", 3);
  EXPECT_EQ(status, Status::kCommError);
  EXPECT_STREQ(lastErrorMessage(), "rank 3: peer lost");
}

TEST(SetError, ClearErrorEmptiesTheMessage) {
  setError(Status::kInternal, nullptr, 0, "something");
  clearError();
  EXPECT_STREQ(lastErrorMessage(), "");
}

TEST(SetError, TheLastErrorBelongsToItsThread) {
  setError(Status::kTimeout, nullptr, 0, "main thread");
  std::string other;
  std::thread worker([&other] {
    setError(Status::kMismatch, nullptr, 0, "worker");
    other = lastErrorMessage();
  });
  worker.join();
  EXPECT_EQ(other, "worker");
  EXPECT_STREQ(lastErrorMessage(), "main thread");
}

Status failingCheck(int value) {
  REE_CHECK_ARG(value > 0, "value=%d must be positive", value);
  return Status::kSuccess;
}

Status forwarding(int value) {
  REE_RETURN_IF_ERROR(failingCheck(value));
  return REE_FAIL(Status::kUnsupported, "reached the end");
}

TEST(CheckMacros, CheckArgFailsAsInvalidArgumentAndReturnIfErrorForwards) {
  EXPECT_EQ(forwarding(-1), Status::kInvalidArgument);
  const std::string message = lastErrorMessage();
  EXPECT_EQ(message.rfind("value=-1 must be positive (", 0), 0u) << message;
  EXPECT_NE(message.find("status_test.cpp:"), std::string::npos) << message;
  EXPECT_NE(message.find("[invalid-argument]"), std::string::npos) << message;
  EXPECT_EQ(forwarding(1), Status::kUnsupported);
  EXPECT_NE(std::string(lastErrorMessage()).find("reached the end"), std::string::npos);
}

TEST(SetError, LongMessagesAreTruncatedNotOverrun) {
  const std::string long_text(5000, 'a');
  setError(Status::kIoError, "/x/core/src/file.cpp", 1, "%s", long_text.c_str());
  const std::string message = lastErrorMessage();
  EXPECT_LT(message.size(), 1280u);
  EXPECT_EQ(message.compare(0, 100, std::string(100, 'a')), 0);
}

}  // namespace
}  // namespace ree
