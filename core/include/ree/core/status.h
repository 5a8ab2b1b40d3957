// Status codes and check macros shared by every REE library.
//
// Library code never calls exit()/abort() and never lets an exception cross a public API: fallible
// functions return ree::Status, and the thread's last error message says what failed and where
// (file:line plus a sentence naming the argument, file, tensor or rank involved). This follows
// NCCL's ncclResult_t + NCCLCHECK habit.
#pragma once

#include <cstdarg>
#include <string>

namespace ree {

enum class Status : int {
  kSuccess = 0,
  kInvalidArgument = 1,  // a shape, pointer, flag or value the caller passed is wrong
  kUnsupported = 2,      // valid request that this build or device cannot serve
  kCudaError = 3,        // a CUDA runtime call or kernel launch failed
  kOutOfMemory = 4,
  kIoError = 5,    // a file could not be read or is malformed
  kCommError = 6,  // MPI/NCCL failure or lost peer
  kTimeout = 7,
  kMismatch = 8,  // a verification found different bits
  kInternal = 9,  // a bug in REE
};

// Short stable name of a status ("invalid-argument", ...).
const char* statusName(Status status);

// Message of the last error recorded on this thread ("" if none).
const char* lastErrorMessage();

// Records "message (file:line) [status]" as this thread's last error and returns `status`; with
// file == nullptr records the message alone (it already carries its origin).
Status setError(Status status, const char* file, int line, const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

// Clears this thread's last error.
void clearError();

}  // namespace ree

// Returns from the enclosing function (which must return ree::Status) if `expr` failed.
#define REE_RETURN_IF_ERROR(expr)                 \
  do {                                            \
    ::ree::Status ree_status_ = (expr);           \
    if (ree_status_ != ::ree::Status::kSuccess) { \
      return ree_status_;                         \
    }                                             \
  } while (0)

// Validates a caller-supplied argument; the message should name it.
#define REE_CHECK_ARG(cond, ...)                                                                \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      return ::ree::setError(::ree::Status::kInvalidArgument, __FILE__, __LINE__, __VA_ARGS__); \
    }                                                                                           \
  } while (0)

#define REE_FAIL(status, ...) ::ree::setError((status), __FILE__, __LINE__, __VA_ARGS__)
