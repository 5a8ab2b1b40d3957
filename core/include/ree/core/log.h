// Diagnostics on stderr, one line each, prefixed "[ree]". Library code reports failures through
// ree::Status; the log is for what is not a failure (warnings, profiles). The level comes from
// the environment variable REE_LOG_LEVEL (error, warning, info, debug; default warning) unless
// setLogLevel() is called.
#pragma once

namespace ree {

enum class LogLevel : int { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

void setLogLevel(LogLevel level);
LogLevel logLevel();

// Writes "[ree] <message>\n" to stderr when `level` is at or below the current level.
void logMessage(LogLevel level, const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

}  // namespace ree
