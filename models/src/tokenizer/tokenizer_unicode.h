// Internal to the tokenizer: the Unicode operations of the normalizers and of the WhitespaceSplit
// pre-tokenizer (normalization forms, lowercase, White_Space, combining marks), backed by
// utf8proc. Inputs are valid UTF-8 (encode checks it first).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ree/core/status.h"

namespace ree::models::tokenizer_internal {

enum class NormalizationForm { kNfc, kNfd, kNfkc, kNfkd };

// Rewrites `text` in the normalization form (canonical or compatibility, composed or
// decomposed), as tokenizers' NormalizedString::nfc/nfd/nfkc/nfkd.
Status normalizeUnicode(NormalizationForm form, std::string* text);

// Each character replaced by its lowercase mapping, character by character as Rust's
// char::to_lowercase (no context: a final sigma stays σ), as tokenizers' Lowercase.
std::string lowercaseUnicode(std::string_view text);

// Without the characters of general category Mark (Mn, Mc, Me): tokenizers' StripAccents.
std::string withoutCombiningMarks(std::string_view text);
// Whether StripAccents removes this character.
bool isCombiningMark(uint32_t code_point);

// The extended grapheme clusters of `text` (Unicode's default segmentation, as the
// unicode-segmentation crate's graphemes(true)).
std::vector<std::string_view> graphemeClusters(std::string_view text);

// Rust's char::is_whitespace: the Unicode White_Space property.
bool isUnicodeWhitespace(uint32_t code_point);

// The code point starting at text[*at] (valid UTF-8); advances *at past it.
uint32_t nextCodePoint(std::string_view text, size_t* at);

}  // namespace ree::models::tokenizer_internal
