// Split/Replace patterns and the split behaviors (see tokenizer_pattern.h).
#include "tokenizer_pattern.h"

#include <algorithm>

#include "ree/core/text.h"

namespace ree::models::tokenizer_internal {
namespace {

// A part of the input: a match or the text between two matches.
struct Part {
  Span span;
  bool flag;  // is a match (before the fold) / must be removed (after it)
};

// find_matches: matches and the gaps between them, in order (empty matches included).
std::vector<Part> partsOf(size_t length, const std::vector<Span>& matches, bool invert) {
  std::vector<Part> parts;
  size_t previous = 0;
  for (const Span& m : matches) {
    if (previous != m.first) parts.push_back({{previous, m.first}, false});
    parts.push_back({m, true});
    previous = m.second;
  }
  if (previous != length) parts.push_back({{previous, length}, false});
  if (invert) {
    for (Part& p : parts)
      p.flag = !p.flag;
  }
  return parts;
}

// Contiguous and MergedWithPrevious: fold a part into the one before it when `merge` says so.
template <typename MergeRule>
std::vector<Part> foldForward(const std::vector<Part>& parts, MergeRule merge) {
  std::vector<Part> folded;
  bool previous_match = false;
  for (const Part& p : parts) {
    if (merge(p.flag, previous_match) && !folded.empty()) {
      folded.back().span.second = p.span.second;
    } else {
      folded.push_back({p.span, false});
    }
    previous_match = p.flag;
  }
  return folded;
}

std::vector<Part> foldMergedWithNext(const std::vector<Part>& parts) {
  std::vector<Part> folded;
  bool previous_match = false;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (it->flag && !previous_match && !folded.empty()) {
      folded.back().span.first = it->span.first;
    } else {
      folded.push_back({it->span, false});
    }
    previous_match = it->flag;
  }
  std::reverse(folded.begin(), folded.end());
  return folded;
}

}  // namespace

Status Pattern::findAll(std::string_view input, std::vector<Span>* matches) const {
  matches->clear();
  if (input.empty()) return Status::kSuccess;
  if (regex) {
    text::Regex::MatchFailure failure;
    if (regex->findAll(input, matches, &failure)) return Status::kSuccess;
    const std::string rest(input.substr(failure.offset));
    return REE_FAIL(Status::kInvalidArgument,
                    "tokenizer '%s': field '%s': the regex gave up (%s) on a %zu-byte piece of "
                    "the text being encoded, in the search from its byte %zu ('%s'): the pattern "
                    "backtracks too much on this input",
                    printableText(source, 400).c_str(), printableText(field, 200).c_str(),
                    failure.message.c_str(), input.size(), failure.offset,
                    printableText(rest, 40).c_str());
  }
  size_t at = 0;
  while ((at = input.find(literal, at)) != std::string_view::npos) {
    matches->emplace_back(at, at + literal.size());
    at += literal.size();
  }
  return Status::kSuccess;
}

Status parsePattern(const LoadContext& ctx, const json& object, const std::string& field,
                    Pattern* pattern) {
  pattern->source = ctx.source;
  pattern->field = field;
  if (!object.is_object() || object.size() != 1) {
    return ctx.malformed(field, "expected {\"String\": ...} or {\"Regex\": ...}");
  }
  if (object.contains("String") && object["String"].is_string()) {
    REE_RETURN_IF_ERROR(ctx.getString(object, "String", field, &pattern->literal));
    if (pattern->literal.empty()) return ctx.unsupported(field + ".String", "empty pattern");
    return Status::kSuccess;
  }
  if (object.contains("Regex") && object["Regex"].is_string()) {
    std::string source;
    REE_RETURN_IF_ERROR(ctx.getString(object, "Regex", field, &source, nullptr, kMaxRegexBytes));
    std::string error;
    pattern->regex = text::Regex::compile(source, &error);
    if (!pattern->regex) return ctx.unsupported(field + ".Regex", "PCRE2 rejects it: " + error);
    return Status::kSuccess;
  }
  return ctx.malformed(field, "expected {\"String\": ...} or {\"Regex\": ...}");
}

Status builtinPattern(const LoadContext& ctx, const char* regex, const std::string& field,
                      Pattern* pattern) {
  pattern->source = ctx.source;
  pattern->field = field;
  std::string error;
  pattern->regex = text::Regex::compile(regex, &error);
  if (!pattern->regex) return ctx.unsupported(field, "built-in regex: " + error);
  return Status::kSuccess;
}

Status replaceAll(const Pattern& pattern, std::string* text, const std::string& content) {
  std::vector<Span> matches;
  REE_RETURN_IF_ERROR(pattern.findAll(*text, &matches));
  if (matches.empty()) return Status::kSuccess;
  std::string out;
  size_t previous = 0;
  for (const Span& m : matches) {
    out.append(*text, previous, m.first - previous);
    out += content;
    previous = m.second;
  }
  out.append(*text, previous, std::string::npos);
  *text = std::move(out);
  return Status::kSuccess;
}

std::vector<Span> splitByMatches(size_t length, const std::vector<Span>& matches,
                                 SplitBehavior behavior, bool invert) {
  const std::vector<Part> parts = partsOf(length, matches, invert);
  std::vector<Part> folded;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      folded = parts;
      break;
    case SplitBehavior::kIsolated:
      for (const Part& p : parts)
        folded.push_back({p.span, false});
      break;
    case SplitBehavior::kContiguous:
      folded =
          foldForward(parts, [](bool is_match, bool previous) { return is_match == previous; });
      break;
    case SplitBehavior::kMergedWithPrevious:
      folded =
          foldForward(parts, [](bool is_match, bool previous) { return is_match && !previous; });
      break;
    case SplitBehavior::kMergedWithNext:
      folded = foldMergedWithNext(parts);
      break;
  }
  std::vector<Span> out;
  for (const Part& p : folded) {
    if (!p.flag && p.span.second > p.span.first) out.push_back(p.span);
  }
  return out;
}

}  // namespace ree::models::tokenizer_internal
