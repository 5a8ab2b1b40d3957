// Unicode operations of the tokenizer (see tokenizer_unicode.h), on utf8proc's tables.
#include "tokenizer_unicode.h"

#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "tokenizer_text.h"

namespace ree::models::tokenizer_internal {

uint32_t nextCodePoint(std::string_view text, size_t* at) {
  const size_t length = text::utf8SequenceLength(static_cast<unsigned char>(text[*at]));
  const uint32_t code_point = text::firstCodePoint(text.substr(*at, length));
  *at += length;
  return code_point;
}

Status normalizeUnicode(NormalizationForm form, std::string* text) {
  if (text->empty()) return Status::kSuccess;
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
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text->data()),
                   static_cast<utf8proc_ssize_t>(text->size()), &mapped,
                   static_cast<utf8proc_option_t>(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(mapped, &std::free);
  if (length < 0) {
    return REE_FAIL(Status::kInternal, "tokenizer: Unicode normalization failed: %s",
                    utf8proc_errmsg(length));
  }
  text->assign(reinterpret_cast<const char*>(mapped), static_cast<size_t>(length));
  return Status::kSuccess;
}

std::string lowercaseUnicode(std::string_view text) {
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
    out += text::encodeUtf8(
        static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(code_point))));
  }
  return out;
}

std::string withoutCombiningMarks(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const size_t begin = at;
    const auto category =
        utf8proc_category(static_cast<utf8proc_int32_t>(nextCodePoint(text, &at)));
    if (category == UTF8PROC_CATEGORY_MN || category == UTF8PROC_CATEGORY_MC ||
        category == UTF8PROC_CATEGORY_ME) {
      continue;
    }
    out.append(text.substr(begin, at - begin));
  }
  return out;
}

bool isUnicodeWhitespace(uint32_t c) {
  return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

}  // namespace ree::models::tokenizer_internal
