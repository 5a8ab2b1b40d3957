// Unicode operations of the tokenizer (see tokenizer_unicode.h), on utf8proc's tables corrected
// where tokenizers answers otherwise (tokenizer_unicode_tables.h).
#include "tokenizer_unicode.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include <utf8proc.h>

#include "tokenizer_text.h"
#include "tokenizer_unicode_tables.h"

namespace ree::models::tokenizer_internal {
namespace {

bool contains(const std::vector<uint32_t>& sorted, uint32_t code_point) {
  return std::binary_search(sorted.begin(), sorted.end(), code_point);
}

utf8proc_option_t optionsOf(NormalizationForm form) {
  // utf8proc_NFC and friends are these options over a NUL-terminated string; utf8proc_map takes
  // the length, so a U+0000 inside the text is normalized like any other character.
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalizationForm::kNfc:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormalizationForm::kNfd:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormalizationForm::kNfkc:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalizationForm::kNfkd:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  return static_cast<utf8proc_option_t>(options);
}

// utf8proc_map on one run of text.
Status mapWithUtf8proc(NormalizationForm form, std::string_view text, std::string* out) {
  out->clear();
  if (text.empty()) return Status::kSuccess;
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &mapped, optionsOf(form));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(mapped, &std::free);
  if (length < 0) {
    return REE_FAIL(Status::kInternal, "tokenizer: Unicode normalization failed: %s",
                    utf8proc_errmsg(length));
  }
  out->assign(reinterpret_cast<const char*>(mapped), static_cast<size_t>(length));
  return Status::kSuccess;
}

}  // namespace

uint32_t nextCodePoint(std::string_view text, size_t* at) {
  const size_t length = text::utf8SequenceLength(static_cast<unsigned char>(text[*at]));
  const uint32_t code_point = text::firstCodePoint(text.substr(*at, length));
  *at += length;
  return code_point;
}

// The characters tokenizers' tables do not know stay as they are and cut the text: each run
// between them is normalized alone (for tokenizers they are starters that compose with nothing,
// so nothing reorders or composes across them).
Status normalizeUnicode(NormalizationForm form, std::string* text) {
  const auto& opaque = unicodeExceptions().normalization_opaque;
  const std::string_view input(*text);
  std::string result, mapped;
  size_t run_begin = 0;
  for (size_t at = 0; at < input.size();) {
    const size_t begin = at;
    if (!contains(opaque, nextCodePoint(input, &at))) continue;
    REE_RETURN_IF_ERROR(mapWithUtf8proc(form, input.substr(run_begin, begin - run_begin), &mapped));
    result += mapped;
    result.append(input.substr(begin, at - begin));
    run_begin = at;
  }
  REE_RETURN_IF_ERROR(mapWithUtf8proc(form, input.substr(run_begin), &mapped));
  result += mapped;
  *text = std::move(result);
  return Status::kSuccess;
}

std::string lowercaseUnicode(std::string_view text) {
  const auto& table = unicodeExceptions().lowercase;
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const uint32_t code_point = nextCodePoint(text, &at);
    if (code_point == 0x130) {
      // SpecialCasing.txt's one unconditional multi-character lowercase mapping, which Rust's
      // char::to_lowercase applies: İ -> i + U+0307 COMBINING DOT ABOVE.
      out += "i\xCC\x87";
      continue;
    }
    auto it = std::lower_bound(table.begin(), table.end(), std::make_pair(code_point, 0u));
    if (it != table.end() && it->first == code_point) {
      out += text::encodeUtf8(it->second);
      continue;
    }
    out += text::encodeUtf8(
        static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(code_point))));
  }
  return out;
}

bool isCombiningMark(uint32_t code_point) {
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(code_point));
  const bool mark = category == UTF8PROC_CATEGORY_MN || category == UTF8PROC_CATEGORY_MC ||
                    category == UTF8PROC_CATEGORY_ME;
  return mark != contains(unicodeExceptions().mark_flips, code_point);
}

std::string withoutCombiningMarks(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const size_t begin = at;
    if (isCombiningMark(nextCodePoint(text, &at))) continue;
    out.append(text.substr(begin, at - begin));
  }
  return out;
}

std::vector<std::string_view> graphemeClusters(std::string_view text) {
  std::vector<std::string_view> clusters;
  utf8proc_int32_t state = 0;
  uint32_t previous = 0;
  size_t begin = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t start = at;
    const uint32_t code_point = nextCodePoint(text, &at);
    if (start > 0 &&
        utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(previous),
                                         static_cast<utf8proc_int32_t>(code_point), &state)) {
      clusters.push_back(text.substr(begin, start - begin));
      begin = start;
    }
    previous = code_point;
  }
  if (begin < text.size()) clusters.push_back(text.substr(begin));
  return clusters;
}

bool isUnicodeWhitespace(uint32_t c) {
  return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

}  // namespace ree::models::tokenizer_internal
