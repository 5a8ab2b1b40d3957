// Internal to the tokenizer: the characters on which tokenizers and utf8proc disagree, so that
// tokenizer_unicode.cpp follows tokenizers. Generated into tokenizer_unicode_tables.cpp by
// scripts/reference/make_unicode_exceptions.py, which asks both libraries about every code point.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace ree::models::tokenizer_internal {

struct UnicodeExceptions {
  // Unknown to tokenizers' normalization tables (an older Unicode) but decomposed, reordered or
  // composed by utf8proc: tokenizers leaves them, and the text between them normalizes alone.
  std::vector<uint32_t> normalization_opaque;  // sorted
  // Lowercase mappings of tokenizers (Rust's std, a newer Unicode) that utf8proc lacks.
  std::vector<std::pair<uint32_t, uint32_t>> lowercase;  // sorted by the first
  // Characters whose "is a combining mark" (StripAccents) tokenizers answers otherwise.
  std::vector<uint32_t> mark_flips;  // sorted
};

const UnicodeExceptions& unicodeExceptions();

}  // namespace ree::models::tokenizer_internal
