#include "ree/core/status.h"

#include <cstdio>
#include <cstring>

namespace ree {
namespace {
thread_local std::string t_last_error;
}  // namespace

const char* statusName(Status status) {
  switch (status) {
    case Status::kSuccess:
      return "success";
    case Status::kInvalidArgument:
      return "invalid-argument";
    case Status::kUnsupported:
      return "unsupported";
    case Status::kCudaError:
      return "cuda-error";
    case Status::kOutOfMemory:
      return "out-of-memory";
    case Status::kIoError:
      return "io-error";
    case Status::kCommError:
      return "comm-error";
    case Status::kTimeout:
      return "timeout";
    case Status::kMismatch:
      return "mismatch";
    case Status::kInternal:
      return "internal";
  }
  return "unknown";
}

const char* lastErrorMessage() {
  return t_last_error.c_str();
}

void clearError() {
  t_last_error.clear();
}

Status setError(Status status, const char* file, int line, const char* format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  if (file == nullptr) {  // a message that already says where (e.g. relayed from another rank)
    t_last_error = buffer;
    return status;
  }
  // Keep only the path below the repository root: "kernels/src/x.cpp:12".
  const char* short_file = file;
  for (const char* marker :
       {"/core/", "/kernels/", "/runtime/", "/comm/", "/models/", "/launcher/", "/partitioner/"}) {
    const char* found = std::strstr(file, marker);
    if (found != nullptr) {
      short_file = found + 1;
      break;
    }
  }
  char full[1280];
  std::snprintf(full, sizeof(full), "%s (%s:%d) [%s]", buffer, short_file, line,
                statusName(status));
  t_last_error = full;
  return status;
}

}  // namespace ree
