// Running the Python reference scripts from the models tests: shell quoting, a command's exit
// status with its combined output, and token ids printed as a Python list for failure messages.
#pragma once

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace ree::test {

// `s` as one single-quoted shell word.
inline std::string shellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `command` through the shell; returns its exit status (as pclose) and appends its stdout and
// stderr to *output.
inline int runCommand(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    output->append(buffer, n);
  return pclose(pipe);
}

inline std::string formatIds(const std::vector<int32_t>& ids) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < ids.size(); ++i)
    out << (i ? ", " : "") << ids[i];
  return out.str() + "]";
}

}  // namespace ree::test
