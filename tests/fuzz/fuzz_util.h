// Shared by the fuzz targets (tests/fuzz/*.cpp, one libFuzzer target each; scripts/fuzz.sh runs
// them). Besides "no crash, no leak, no hang" (the sanitizers and libFuzzer), every target checks
// the project's error contract on each refused input: a failure leaves a message, and that message
// is ONE line (a hostile file must not be able to forge further lines of output).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "ree/core/log.h"
#include "ree/core/status.h"

namespace ree::fuzz {

// Aborts (a crash libFuzzer saves) when `condition` is false.
inline void require(bool condition, const char* what, const std::string& detail = "") {
  if (condition) return;
  std::fprintf(stderr, "fuzz property violated: %s\n%s\n", what, detail.c_str());
  std::abort();
}

// Checks what a call returned: success, or a failure with a non-empty one-line message.
inline void checkStatus(Status status, const char* call) {
  if (status == Status::kSuccess) return;
  const std::string message = lastErrorMessage();
  require(!message.empty(), "a failure without a message", call);
  require(message.find('\n') == std::string::npos && message.find('\r') == std::string::npos,
          "an error message of more than one line", std::string(call) + ": " + message);
}

// Starts each input from a clean slate and keeps warnings off the fuzzer's output.
inline void beginInput() {
  clearError();
}
inline void quietLogs() {
  setLogLevel(LogLevel::kError);
}

// A scratch directory in /dev/shm (memory, not disk), one per process, for the parsers that only
// take a path; removed at exit. Never shared between processes (scripts/fuzz.sh runs targets in
// parallel).
inline const std::string& scratchDirectory() {
  // Never destroyed: the exit handler that removes the directory runs after static destructors.
  static const std::string* directory = [] {
    std::error_code error;
    const bool shm = std::filesystem::is_directory("/dev/shm", error);
    auto* path = new std::string(std::string(shm ? "/dev/shm" : "/tmp") + "/ree-fuzz-" +
                                 std::to_string(getpid()));
    std::filesystem::create_directories(*path, error);
    if (error) std::abort();
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratchDirectory(), ignored);
    });
    return path;
  }();
  return *directory;
}

// Writes `bytes` to `path` (truncating); aborts on an I/O error (a harness failure, not a finding).
inline void writeFile(const std::string& path, const uint8_t* data, size_t size) {
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, file) != size) std::abort();
  if (std::fclose(file) != 0) std::abort();
}

// REE_FUZZ_DUMP=1: the targets that support it print one JSON line per input on stdout (what they
// computed), for tests/fuzz/tokenizer_differential.py to compare with the reference library.
inline bool dumpRequested() {
  static const bool requested = std::getenv("REE_FUZZ_DUMP") != nullptr;
  return requested;
}

// FNV-1a 64 of the input, in hex: how a dump line names its input.
inline std::string inputKey(const uint8_t* data, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i)
    hash = (hash ^ data[i]) * 0x100000001b3ull;
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

inline std::string idsJson(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i)
    out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "]";
}

inline std::string_view asText(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

}  // namespace ree::fuzz
