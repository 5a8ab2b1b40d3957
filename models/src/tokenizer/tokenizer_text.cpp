// UTF-8 and regex helpers of the tokenizer (see tokenizer_text.h).
#include "tokenizer_text.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace ree::models::text {
namespace {

// Length of the valid UTF-8 sequence at bytes[i], or 0 with `*invalid_length` set to the length
// of the maximal invalid subpart (Unicode "substitution of maximal subparts", as Rust does).
size_t validSequenceAt(std::string_view bytes, size_t i, size_t* invalid_length) {
  const auto lead = static_cast<unsigned char>(bytes[i]);
  if (lead < 0x80) return 1;
  size_t continuation_count = 0;
  unsigned first_low = 0x80, first_high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    continuation_count = 1;
  } else if (lead == 0xE0) {
    continuation_count = 2;
    first_low = 0xA0;
  } else if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) {
    continuation_count = 2;
  } else if (lead == 0xED) {
    continuation_count = 2;
    first_high = 0x9F;  // no surrogates
  } else if (lead == 0xF0) {
    continuation_count = 3;
    first_low = 0x90;
  } else if (lead >= 0xF1 && lead <= 0xF3) {
    continuation_count = 3;
  } else if (lead == 0xF4) {
    continuation_count = 3;
    first_high = 0x8F;  // at most U+10FFFF
  } else {
    *invalid_length = 1;
    return 0;
  }
  for (size_t k = 0; k < continuation_count; ++k) {
    const size_t at = i + 1 + k;
    if (at >= bytes.size()) {
      *invalid_length = 1 + k;
      return 0;
    }
    const auto byte = static_cast<unsigned char>(bytes[at]);
    const unsigned low = k == 0 ? first_low : 0x80;
    const unsigned high = k == 0 ? first_high : 0xBF;
    if (byte < low || byte > high) {
      *invalid_length = 1 + k;
      return 0;
    }
  }
  return continuation_count + 1;
}

}  // namespace

bool isValidUtf8(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    size_t invalid_length = 0;
    const size_t length = validSequenceAt(bytes, i, &invalid_length);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

std::string lossyUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    size_t invalid_length = 0;
    const size_t length = validSequenceAt(bytes, i, &invalid_length);
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      i += invalid_length;
    } else {
      out.append(bytes.substr(i, length));
      i += length;
    }
  }
  return out;
}

std::string encodeUtf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

uint32_t firstCodePoint(std::string_view s) {
  if (s.empty()) return 0;
  const auto b0 = static_cast<unsigned char>(s[0]);
  const size_t length = utf8SequenceLength(b0);
  if (length == 1 || s.size() < length) return b0;
  uint32_t cp = b0 & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < length; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[k]) & 0x3F);
  return cp;
}

Regex::~Regex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

std::shared_ptr<const Regex> Regex::compile(const std::string& pattern, std::string* error) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    if (error) {
      *error = std::string(reinterpret_cast<const char*>(message)) + " at offset " +
               std::to_string(error_offset);
    }
    return nullptr;
  }
  // JIT only speeds matching up; the interpreter gives the same matches when it is unavailable.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return std::shared_ptr<const Regex>(new Regex(code));
}

bool Regex::findAll(std::string_view text, std::vector<Span>* matches,
                    MatchFailure* failure) const {
  matches->clear();
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* match_data = pcre2_match_data_create_from_pattern(code, nullptr);
  if (match_data == nullptr) {
    failure->message = "cannot allocate PCRE2 match data";
    failure->offset = 0;
    return false;
  }
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t search_from = 0;
  bool has_previous = false;
  size_t previous_end = 0;
  bool ok = true;
  while (search_from <= text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), search_from, PCRE2_NO_UTF_CHECK,
                               match_data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      failure->message = reinterpret_cast<const char*>(message);
      failure->offset = search_from;
      ok = false;
      break;
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
    const size_t begin = ovector[0], end = ovector[1];
    if (begin == end && has_previous && end == previous_end) {
      // onig's FindMatches refuses an empty match right after the previous match and moves
      // one character on (one byte past the end, which ends the search).
      search_from += search_from < text.size()
                         ? utf8SequenceLength(static_cast<unsigned char>(text[search_from]))
                         : 1;
      continue;
    }
    matches->emplace_back(begin, end);
    search_from = end;
    previous_end = end;
    has_previous = true;
  }
  pcre2_match_data_free(match_data);
  return ok;
}

bool Regex::canMatchEmpty() const {
  uint32_t match_empty = 1;
  pcre2_pattern_info(static_cast<pcre2_code*>(code_), PCRE2_INFO_MATCHEMPTY, &match_empty);
  return match_empty != 0;
}

bool Regex::matchesAt(std::string_view text, size_t offset) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* match_data = pcre2_match_data_create_from_pattern(code, nullptr);
  if (match_data == nullptr) return false;
  const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), offset,
                             PCRE2_NO_UTF_CHECK | PCRE2_ANCHORED, match_data, nullptr);
  pcre2_match_data_free(match_data);
  return rc >= 0;
}

}  // namespace ree::models::text
