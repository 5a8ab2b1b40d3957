#include "flag_values.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "ree/core/text.h"

namespace ree::launcher {
namespace {

bool isDigits(const std::string& text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// [-]digits[.digits][(e|E)[+|-]digits], or [-].digits...: what strtod accepts minus "inf", "nan",
// hex floats, leading spaces and a leading '+'.
bool isPlainDecimal(const std::string& text) {
  size_t i = 0;
  auto digits = [&]() {
    size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9')
      ++i;
    return i - start;
  };
  if (i < text.size() && text[i] == '-') ++i;
  size_t whole = digits();
  size_t fraction = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    fraction = digits();
  }
  if (whole + fraction == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == text.size();
}

}  // namespace

Status parseIntegerFlag(const char* flag, const std::string& text, int64_t min, int64_t max,
                        int64_t* value) {
  REE_CHECK_ARG(min >= 0 && min <= max, "parseIntegerFlag %s: bad range", flag);
  errno = 0;
  unsigned long long parsed = isDigits(text) ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  if (!isDigits(text) || errno != 0 || parsed < static_cast<unsigned long long>(min) ||
      parsed > static_cast<unsigned long long>(max)) {
    return REE_FAIL(Status::kInvalidArgument, "%s '%s': expected an integer in [%lld, %lld]", flag,
                    printableText(text, 60).c_str(), static_cast<long long>(min),
                    static_cast<long long>(max));
  }
  *value = static_cast<int64_t>(parsed);
  return Status::kSuccess;
}

Status parseIntFlag(const char* flag, const std::string& text, int min, int max, int* value) {
  int64_t wide = 0;
  REE_RETURN_IF_ERROR(parseIntegerFlag(flag, text, min, max, &wide));
  *value = static_cast<int>(wide);
  return Status::kSuccess;
}

Status parseUint64Flag(const char* flag, const std::string& text, uint64_t* value) {
  errno = 0;
  unsigned long long parsed = isDigits(text) ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  if (!isDigits(text) || errno != 0) {
    return REE_FAIL(Status::kInvalidArgument,
                    "%s '%s': expected an integer in [0, 18446744073709551615]", flag,
                    printableText(text, 60).c_str());
  }
  *value = static_cast<uint64_t>(parsed);
  return Status::kSuccess;
}

Status parseRealFlag(const char* flag, const std::string& text, double min, double max,
                     bool min_excluded, double* value) {
  double parsed = isPlainDecimal(text) ? std::strtod(text.c_str(), nullptr) : NAN;
  bool ok = std::isfinite(parsed) && (min_excluded ? parsed > min : parsed >= min) && parsed <= max;
  if (!ok) {
    return REE_FAIL(Status::kInvalidArgument, "%s '%s': expected a finite number in %s%g, %g]",
                    flag, printableText(text, 60).c_str(), min_excluded ? "(" : "[", min, max);
  }
  *value = parsed;
  return Status::kSuccess;
}

}  // namespace ree::launcher
