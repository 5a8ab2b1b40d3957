// Internal to the tokenizer: the patterns of Split and Replace (a literal string or a regex) with
// `tokenizers`' find_matches semantics, and NormalizedString::split's delimiter behaviors.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer_load.h"
#include "tokenizer_text.h"

namespace ree::models::tokenizer_internal {

using text::Span;

// A Split/Replace pattern. It remembers the file and field it came from, so that a regex that
// gives up on some input (PCRE2's match limit) is reported with both, and with the input.
struct Pattern {
  std::string literal;
  std::shared_ptr<const text::Regex> regex;
  std::string source;  // tokenizer file, for messages
  std::string field;   // e.g. "pre_tokenizer.pretokenizers[0].pattern"

  // tokenizers' Pattern::find_matches: no match in an empty input; a literal matches left to
  // right without overlap; a regex as Regex::findAll (empty matches included).
  Status findAll(std::string_view input, std::vector<Span>* matches) const;
};

// Parses {"String": ...} or {"Regex": ...} at `field`.
Status parsePattern(const LoadContext& ctx, const json& object, const std::string& field,
                    Pattern* pattern);

// A pattern around a regex REE itself supplies (ByteLevel's GPT-2 regex); `field` names where it
// is used.
Status builtinPattern(const LoadContext& ctx, const char* regex, const std::string& field,
                      Pattern* pattern);

// tokenizers' replace: every match (empty ones too) replaced by `content`.
Status replaceAll(const Pattern& pattern, std::string* text, const std::string& content);

// SplitDelimiterBehavior of `tokenizers` (normalizer.rs, NormalizedString::split).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Pieces of a `length`-byte string cut at `matches` after the behavior; empty pieces dropped.
std::vector<Span> splitByMatches(size_t length, const std::vector<Span>& matches,
                                 SplitBehavior behavior, bool invert);

}  // namespace ree::models::tokenizer_internal
