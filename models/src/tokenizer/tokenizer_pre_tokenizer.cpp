// Pre-tokenizers: Sequence, Split, ByteLevel, Metaspace, WhitespaceSplit (see
// tokenizer_pre_tokenizer.h).
#include "tokenizer_pre_tokenizer.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "tokenizer_byte_level.h"
#include "tokenizer_unicode.h"

namespace ree::models::tokenizer_internal {
namespace {

// The GPT-2 pre-tokenization regex that ByteLevel(use_regex=true) applies.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string toByteLevel(const std::string& text) {
  std::string mapped;
  mapped.reserve(text.size() * 2);
  for (unsigned char b : text)
    mapped += byteLevelAlphabet().byte_to_utf8[b];
  return mapped;
}

std::vector<Span> wholePiece(const std::string& text) {
  if (text.empty()) return {};
  return {{0, text.size()}};
}

// WhitespaceSplit: tokenizers splits on char::is_whitespace, each such character a removed match.
std::vector<Span> whitespaceSplitSpans(const std::string& text) {
  std::vector<Span> matches;
  for (size_t at = 0; at < text.size();) {
    const size_t begin = at;
    if (isUnicodeWhitespace(nextCodePoint(text, &at))) matches.emplace_back(begin, at);
  }
  return splitByMatches(text.size(), matches, SplitBehavior::kRemoved, false);
}

Status parseSplit(const LoadContext& ctx, const json& object, const std::string& field,
                  PreTokenizer* out) {
  out->kind = PreTokenizer::Kind::kSplit;
  if (!object.contains("pattern")) return ctx.malformed(field + ".pattern", "missing");
  REE_RETURN_IF_ERROR(parsePattern(ctx, object["pattern"], field + ".pattern", &out->pattern));
  std::string behavior;
  REE_RETURN_IF_ERROR(ctx.getString(object, "behavior", field, &behavior));
  static const std::pair<const char*, SplitBehavior> kBehaviors[] = {
      {"Removed", SplitBehavior::kRemoved},
      {"Isolated", SplitBehavior::kIsolated},
      {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", SplitBehavior::kMergedWithNext},
      {"Contiguous", SplitBehavior::kContiguous}};
  bool known = false;
  for (const auto& [name, value] : kBehaviors) {
    if (behavior == name) {
      out->behavior = value;
      known = true;
    }
  }
  if (!known) return ctx.unsupported(field + ".behavior", "unknown behavior '" + behavior + "'");
  return ctx.getBool(object, "invert", field, &out->invert);
}

}  // namespace

Status PreTokenizer::metaspaceSpans(Piece* piece, std::vector<Span>* spans) const {
  std::string replaced;
  for (char c : piece->text) {
    if (c == ' ') {
      replaced += replacement;
    } else {
      replaced += c;
    }
  }
  piece->text = std::move(replaced);
  const bool starts_with_replacement = piece->text.rfind(replacement, 0) == 0;
  if (!starts_with_replacement && (prepend_scheme == PrependScheme::kAlways ||
                                   (prepend_scheme == PrependScheme::kFirst && piece->at_origin))) {
    piece->text.insert(0, replacement);
  }
  if (!split) {
    *spans = wholePiece(piece->text);
    return Status::kSuccess;
  }
  Pattern literal;
  literal.literal = replacement;
  std::vector<Span> matches;
  REE_RETURN_IF_ERROR(literal.findAll(piece->text, &matches));
  *spans = splitByMatches(piece->text.size(), matches, SplitBehavior::kMergedWithNext, false);
  return Status::kSuccess;
}

Status PreTokenizer::spansOf(Piece* piece, std::vector<Span>* spans) const {
  std::vector<Span> matches;
  switch (kind) {
    case Kind::kSplit:
      REE_RETURN_IF_ERROR(pattern.findAll(piece->text, &matches));
      *spans = splitByMatches(piece->text.size(), matches, behavior, invert);
      return Status::kSuccess;
    case Kind::kByteLevel:
      if (add_prefix_space && piece->text.rfind(' ', 0) != 0) piece->text.insert(0, " ");
      if (!use_regex) {
        *spans = wholePiece(piece->text);
        return Status::kSuccess;
      }
      REE_RETURN_IF_ERROR(pattern.findAll(piece->text, &matches));
      *spans = splitByMatches(piece->text.size(), matches, SplitBehavior::kIsolated, false);
      return Status::kSuccess;
    case Kind::kMetaspace:
      return metaspaceSpans(piece, spans);
    case Kind::kWhitespaceSplit:
      *spans = whitespaceSplitSpans(piece->text);
      return Status::kSuccess;
    case Kind::kSequence:
      break;
  }
  return REE_FAIL(Status::kInternal, "tokenizer: a Sequence pre-tokenizer has no spans");
}

Status PreTokenizer::apply(std::vector<Piece>* pieces) const {
  if (kind == Kind::kSequence) {
    for (const PreTokenizer& child : children)
      REE_RETURN_IF_ERROR(child.apply(pieces));
    return Status::kSuccess;
  }
  std::vector<Piece> out;
  out.reserve(pieces->size());
  std::vector<Span> spans;
  for (Piece& piece : *pieces) {
    if (piece.added_id >= 0) {
      out.push_back(std::move(piece));
      continue;
    }
    REE_RETURN_IF_ERROR(spansOf(&piece, &spans));
    for (const Span& span : spans) {
      Piece sub;
      sub.text = piece.text.substr(span.first, span.second - span.first);
      sub.at_origin = piece.at_origin && span.first == 0;
      if (kind == Kind::kByteLevel) sub.text = toByteLevel(sub.text);
      out.push_back(std::move(sub));
    }
  }
  *pieces = std::move(out);
  return Status::kSuccess;
}

namespace {

// prepend_scheme (default always; null refused, as tokenizers), reconciled with the legacy
// add_prefix_space as tokenizers does: false requires the scheme never, true changes nothing.
Status parsePrependScheme(const LoadContext& ctx, const json& object, const std::string& field,
                          PrependScheme* scheme) {
  *scheme = PrependScheme::kAlways;
  if (object.contains("prepend_scheme")) {
    std::string name;
    if (object["prepend_scheme"].is_null()) {
      return ctx.malformed(field + ".prepend_scheme", "null (tokenizers refuses it)");
    }
    REE_RETURN_IF_ERROR(ctx.getString(object, "prepend_scheme", field, &name));
    static const std::pair<const char*, PrependScheme> kSchemes[] = {
        {"always", PrependScheme::kAlways},
        {"first", PrependScheme::kFirst},
        {"never", PrependScheme::kNever}};
    auto it = std::find_if(std::begin(kSchemes), std::end(kSchemes),
                           [&](const auto& entry) { return name == entry.first; });
    if (it == std::end(kSchemes)) {
      return ctx.unsupported(field + ".prepend_scheme", "unknown scheme '" + name + "'");
    }
    *scheme = it->second;
  }
  bool add_prefix_space = true;
  REE_RETURN_IF_ERROR(ctx.getBool(object, "add_prefix_space", field, &add_prefix_space));
  if (!add_prefix_space && *scheme != PrependScheme::kNever) {
    return ctx.malformed(field + ".add_prefix_space",
                         "false does not match the prepend_scheme (tokenizers refuses the file)");
  }
  return Status::kSuccess;
}

}  // namespace

Status parseMetaspaceOptions(const LoadContext& ctx, const json& object, const std::string& field,
                             std::string* replacement, PrependScheme* scheme, bool* split) {
  REE_RETURN_IF_ERROR(ctx.getRequiredString(object, "replacement", field, replacement));
  if (replacement->empty() || text::utf8SequenceLength(static_cast<unsigned char>(
                                  (*replacement)[0])) != replacement->size()) {
    return ctx.malformed(field + ".replacement", "expected a single character");
  }
  REE_RETURN_IF_ERROR(parsePrependScheme(ctx, object, field, scheme));
  if (split) REE_RETURN_IF_ERROR(ctx.getBool(object, "split", field, split));
  return Status::kSuccess;
}

Status parsePreTokenizer(const LoadContext& ctx, const json& object, const std::string& field,
                         PreTokenizer* out) {
  std::string type;
  REE_RETURN_IF_ERROR(ctx.getType(object, field, &type));
  if (type == "Sequence") {
    out->kind = PreTokenizer::Kind::kSequence;
    const json* list = nullptr;
    REE_RETURN_IF_ERROR(ctx.getArray(object, "pretokenizers", field, kMaxListItems, &list));
    for (size_t i = 0; i < list->size(); ++i) {
      PreTokenizer child;
      REE_RETURN_IF_ERROR(
          parsePreTokenizer(ctx, (*list)[i], elementField(field + ".pretokenizers", i), &child));
      out->children.push_back(std::move(child));
    }
    return Status::kSuccess;
  }
  if (type == "Split") return parseSplit(ctx, object, field, out);
  if (type == "ByteLevel") {
    out->kind = PreTokenizer::Kind::kByteLevel;
    REE_RETURN_IF_ERROR(
        ctx.getRequiredBool(object, "add_prefix_space", field, &out->add_prefix_space));
    bool trim_offsets = false;  // offsets only; required as tokenizers requires it
    REE_RETURN_IF_ERROR(ctx.getRequiredBool(object, "trim_offsets", field, &trim_offsets));
    REE_RETURN_IF_ERROR(ctx.getBool(object, "use_regex", field, &out->use_regex));
    if (!out->use_regex) return Status::kSuccess;
    return builtinPattern(ctx, kGpt2Pattern, field + " (the GPT-2 regex of use_regex)",
                          &out->pattern);
  }
  if (type == "Metaspace") {
    out->kind = PreTokenizer::Kind::kMetaspace;
    return parseMetaspaceOptions(ctx, object, field, &out->replacement, &out->prepend_scheme,
                                 &out->split);
  }
  if (type == "WhitespaceSplit") {
    out->kind = PreTokenizer::Kind::kWhitespaceSplit;
    return Status::kSuccess;
  }
  return ctx.unsupported(field + ".type", "unsupported pre-tokenizer '" + type +
                                              "' (supported: Sequence, Split, ByteLevel, "
                                              "Metaspace, WhitespaceSplit)");
}

}  // namespace ree::models::tokenizer_internal
