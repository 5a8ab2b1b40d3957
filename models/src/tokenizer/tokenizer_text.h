// Internal helpers of the tokenizer (not installed): UTF-8 handling and PCRE2 regexes with the
// exact matching conventions of Hugging Face `tokenizers`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ree/core/status.h"

namespace ree::models::text {

using Span = std::pair<size_t, size_t>;  // [begin, end) byte offsets

// Byte length of the UTF-8 sequence that starts with `lead` (input already validated).
inline size_t utf8SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

bool isValidUtf8(std::string_view bytes);

// Rust's String::from_utf8_lossy: every maximal invalid subpart becomes one U+FFFD.
std::string lossyUtf8(std::string_view bytes);

// UTF-8 encoding of one code point.
std::string encodeUtf8(uint32_t code_point);
// First code point of valid UTF-8 `text` (0 when empty).
uint32_t firstCodePoint(std::string_view text);

inline bool endsWithReplacementChar(std::string_view text) {
  return text.size() >= 3 && text.substr(text.size() - 3) == "\xEF\xBF\xBD";
}

// A PCRE2 pattern compiled in UTF mode with Unicode properties (PCRE2_UTF | PCRE2_UCP), the
// closest match of the Oniguruma regexes `tokenizers` uses. Immutable and thread-safe.
class Regex {
 public:
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // On failure `*error` receives PCRE2's message and the offset of the error.
  static std::shared_ptr<const Regex> compile(const std::string& pattern, std::string* error);

  // Why a search gave up (PCRE2's match or depth limit on a backtracking pattern): PCRE2's
  // message and the byte offset of `text` where the failing search started.
  struct MatchFailure {
    std::string message;
    size_t offset = 0;
  };
  // Matches left to right exactly as Oniguruma's find_iter (the `onig` crate tokenizers uses):
  // each search starts where the previous match ended; an empty match is kept unless it sits
  // where the previous match ended, in which case the search moves one character on. Empty
  // matches therefore count (e.g. `x*` on "ab" matches at 0, 1 and 2). `text` must be valid
  // UTF-8. Returns false, with `*failure` filled, when PCRE2 gives up.
  bool findAll(std::string_view text, std::vector<Span>* matches, MatchFailure* failure) const;
  // True if the pattern might match the empty string (PCRE2_INFO_MATCHEMPTY: e.g. `x*`, `$`,
  // `(?=a)`).
  bool canMatchEmpty() const;
  // True if the pattern matches starting exactly at `offset`.
  bool matchesAt(std::string_view text, size_t offset) const;

 private:
  explicit Regex(void* code) : code_(code) {}
  void* code_;  // pcre2_code_8*
};

}  // namespace ree::models::text
