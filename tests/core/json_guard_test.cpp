// core/include/ree/core/json_guard.h: repeated keys anywhere, nesting beyond the limit and syntax
// errors are refused with one message naming the text and where; valid JSON passes; linear time.
#include "ree/core/json_guard.h"

#include <gtest/gtest.h>

#include <ctime>
#include <string>

namespace ree {
namespace {

// The check failed and its message contains `expected` (and names the text's origin).
void expectRefused(const std::string& text, const std::string& expected,
                   JsonGuardLimits limits = JsonGuardLimits()) {
  EXPECT_EQ(checkJsonText(text, "config.json '/m/config.json'", limits), Status::kIoError) << text;
  const std::string message = lastErrorMessage();
  EXPECT_EQ(message.rfind("config.json '/m/config.json': ", 0), 0u) << message;
  EXPECT_NE(message.find(expected), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(JsonGuard, ValidJsonPasses) {
  for (const char* text :
       {"{}", "[]", "0", "\"s\"", "null", R"({"a": 1, "b": {"a": 2}, "c": [{"a": 3}, {"a": 4}]})",
        R"({"a": [1, 2.5, -3e4, true, false, null, "x", [], {}]})", " \n{\"k\": \"\\u00e9\"}\t"}) {
    EXPECT_EQ(checkJsonText(text, "t"), Status::kSuccess) << text << ": " << lastErrorMessage();
  }
}

TEST(JsonGuard, SameKeyInDifferentObjectsIsAllowed) {
  EXPECT_EQ(checkJsonText(R"([{"id": 1}, {"id": 2}])", "t"), Status::kSuccess);
  EXPECT_EQ(checkJsonText(R"({"x": {"x": {"x": 1}}})", "t"), Status::kSuccess);
}

TEST(JsonGuard, RepeatedKeyAtTopLevelIsRefused) {
  expectRefused(R"({"vocab_size": 10, "hidden": 4, "vocab_size": 99})",
                "repeats the key 'vocab_size' in the object at $");
}

TEST(JsonGuard, RepeatedKeyInANestedObjectNamesItsPath) {
  expectRefused(R"({"model": {"rope": {"theta": 1, "theta": 2}}})",
                "repeats the key 'theta' in the object at $.model.rope");
}

TEST(JsonGuard, RepeatedKeyInsideAnArrayNamesTheIndex) {
  expectRefused(R"({"requests": [{"a": 1}, 7, {"b": [0, {"c": 1, "c": 1}]}]})",
                "repeats the key 'c' in the object at $.requests[2].b[1]");
  expectRefused(R"([[], {"k": 0, "k": 0}])", "repeats the key 'k' in the object at $[1]");
}

TEST(JsonGuard, RepeatedKeyIsEscapedInTheMessage) {
  expectRefused("{\"a\\nb\": 1, \"a\\nb\": 2}", "repeats the key 'a\\x0ab'");
}

TEST(JsonGuard, NestingDeeperThanTheLimitIsRefused) {
  JsonGuardLimits limits;
  limits.max_depth = 8;
  EXPECT_EQ(checkJsonText(std::string(8, '[') + std::string(8, ']'), "t", limits),
            Status::kSuccess);
  expectRefused(std::string(9, '[') + std::string(9, ']'), "nests deeper than 8 levels", limits);
  // The default limit, with objects, and far deeper than any stack could recurse.
  std::string deep;
  for (int i = 0; i < 100000; ++i)
    deep += "{\"k\":";
  expectRefused(deep, "nests deeper than 256 levels at $.k.k");
}

TEST(JsonGuard, SyntaxErrorsNameTheByte) {
  expectRefused(R"({"a": 1,})", "not valid JSON (byte ");
  expectRefused("{\"a\": 1} trailing", "not valid JSON (byte ");
  expectRefused("", "not valid JSON");
  expectRefused(R"({"a": 1)", "not valid JSON");
}

// CPU time of this thread: unlike the wall clock, not stretched by other processes on a busy
// machine.
double threadCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// 100,000 distinct keys in one object: the check is linear (a quadratic scan would take minutes).
TEST(JsonGuard, HundredThousandKeysAreCheckedWellUnderASecond) {
  std::string text = "{";
  for (int i = 0; i < 100000; ++i) {
    if (i > 0) text += ",";
    text += "\"key" + std::to_string(i) + "\":" + std::to_string(i);
  }
  text += "}";
  const double start = threadCpuSeconds();
  EXPECT_EQ(checkJsonText(text, "t"), Status::kSuccess) << lastErrorMessage();
  EXPECT_LT(threadCpuSeconds() - start, 5.0) << "seconds of CPU time (quadratic: minutes)";
  // The same object with its last key repeated is refused, naming that key.
  text.back() = ',';
  text += "\"key99999\":0}";
  expectRefused(text, "repeats the key 'key99999' in the object at $");
}

}  // namespace
}  // namespace ree
