#include "ree/core/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ree {
namespace {

LogLevel levelFromEnvironment() {
  const char* env = std::getenv("REE_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kWarning;
  if (std::strcmp(env, "error") == 0) return LogLevel::kError;
  if (std::strcmp(env, "info") == 0) return LogLevel::kInfo;
  if (std::strcmp(env, "debug") == 0) return LogLevel::kDebug;
  return LogLevel::kWarning;
}

std::atomic<int>& currentLevel() {
  static std::atomic<int> level{static_cast<int>(levelFromEnvironment())};
  return level;
}

}  // namespace

void setLogLevel(LogLevel level) {
  currentLevel().store(static_cast<int>(level));
}

LogLevel logLevel() {
  return static_cast<LogLevel>(currentLevel().load());
}

void logMessage(LogLevel level, const char* format, ...) {
  if (static_cast<int>(level) > currentLevel().load()) return;
  char buffer[2048];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  std::fprintf(stderr, "[ree] %s\n", buffer);  // one write per line, whole lines under threads
}

}  // namespace ree
