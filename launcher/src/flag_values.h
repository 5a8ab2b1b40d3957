// Strict readers for flag values. cxxopts would say "Argument 'nan' failed to parse", naming
// neither the flag nor what it wants; these name all three: "--top-k '2147483648': expected an
// integer in [0, 2147483647]". Integers are decimal digits only (no sign, space, exponent or
// hex); reals are plain decimal numbers and must be finite.
#pragma once

#include <cstdint>
#include <string>

#include "ree/core/status.h"

namespace ree::launcher {

// `text` as an integer in [min, max], 0 <= min <= max (digits only).
Status parseIntegerFlag(const char* flag, const std::string& text, int64_t min, int64_t max,
                        int64_t* value);

// Same, into an int (max must fit).
Status parseIntFlag(const char* flag, const std::string& text, int min, int max, int* value);

// `text` as an unsigned 64-bit integer (digits only, up to 18446744073709551615).
Status parseUint64Flag(const char* flag, const std::string& text, uint64_t* value);

// `text` as a finite number in [min, max], or (min, max] when `min_excluded`.
Status parseRealFlag(const char* flag, const std::string& text, double min, double max,
                     bool min_excluded, double* value);

}  // namespace ree::launcher
