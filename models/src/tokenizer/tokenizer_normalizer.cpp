// Normalizers (see tokenizer_normalizer.h).
#include "tokenizer_normalizer.h"

#include <utility>

#include "tokenizer_text.h"

namespace ree::models::tokenizer_internal {
namespace {

// tokenizers' NormalizedString::lstrip/rstrip: White_Space characters at either end.
std::string stripWhitespace(const std::string& text, bool left, bool right) {
  size_t begin = 0, end = text.size();
  if (left) {
    for (size_t at = 0; at < text.size();) {
      if (!isUnicodeWhitespace(nextCodePoint(text, &at))) break;
      begin = at;
    }
  }
  if (right) {
    size_t last_kept_end = begin;
    for (size_t at = begin; at < text.size();) {
      if (!isUnicodeWhitespace(nextCodePoint(text, &at))) last_kept_end = at;
    }
    end = last_kept_end;
  }
  return text.substr(begin, end - begin);
}

bool nmtRemoves(uint32_t c) {
  return (c >= 0x1 && c <= 0x8) || c == 0xB || (c >= 0xE && c <= 0x1F) || c == 0x7F || c == 0x8F ||
         c == 0x9F;
}

// tokenizers' Nmt: drops some control characters, turns other separators into spaces.
std::string nmtNormalize(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const size_t begin = at;
    const uint32_t c = nextCodePoint(text, &at);
    if (nmtRemoves(c)) continue;
    const bool to_space = c == 0x9 || c == 0xA || c == 0xC || c == 0xD || c == 0x1680 ||
                          (c >= 0x200B && c <= 0x200F) || c == 0x2028 || c == 0x2029 ||
                          c == 0x2581 || c == 0xFEFF || c == 0xFFFD;
    if (to_space) {
      out += ' ';
    } else {
      out.append(text, begin, at - begin);
    }
  }
  return out;
}

Status parseReplace(const LoadContext& ctx, const json& object, const std::string& field,
                    Normalizer* out) {
  out->kind = Normalizer::Kind::kReplace;
  REE_RETURN_IF_ERROR(ctx.getRequiredString(object, "content", field, &out->content));
  if (!object.contains("pattern")) return ctx.malformed(field + ".pattern", "missing");
  REE_RETURN_IF_ERROR(parsePattern(ctx, object["pattern"], field + ".pattern", &out->pattern));
  if (out->pattern.regex && out->pattern.regex->canMatchEmpty()) {
    // tokenizers 0.23 panics (normalizer.rs, index out of bounds) on many texts when a Replace
    // normalizer matches the empty string: there is no result to reproduce.
    return ctx.unsupported(field + ".pattern.Regex",
                           "a Replace normalizer regex that can match the empty string "
                           "(tokenizers 0.23 panics on such matches)");
  }
  return Status::kSuccess;
}

Status parseSequence(const LoadContext& ctx, const json& object, const std::string& field,
                     Normalizer* out) {
  out->kind = Normalizer::Kind::kSequence;
  const json* list = nullptr;
  REE_RETURN_IF_ERROR(ctx.getArray(object, "normalizers", field, kMaxListItems, &list));
  for (size_t i = 0; i < list->size(); ++i) {
    Normalizer child;
    REE_RETURN_IF_ERROR(
        parseNormalizer(ctx, (*list)[i], elementField(field + ".normalizers", i), &child));
    out->children.push_back(std::move(child));
  }
  return Status::kSuccess;
}

// The normalizers that have no option but their type.
bool parseSimple(const std::string& type, Normalizer* out) {
  static const std::pair<const char*, NormalizationForm> kForms[] = {
      {"NFC", NormalizationForm::kNfc},
      {"NFD", NormalizationForm::kNfd},
      {"NFKC", NormalizationForm::kNfkc},
      {"NFKD", NormalizationForm::kNfkd}};
  for (const auto& [name, form] : kForms) {
    if (type == name) {
      out->kind = Normalizer::Kind::kUnicodeForm;
      out->form = form;
      return true;
    }
  }
  static const std::pair<const char*, Normalizer::Kind> kKinds[] = {
      {"Lowercase", Normalizer::Kind::kLowercase},
      {"StripAccents", Normalizer::Kind::kStripAccents},
      {"Nmt", Normalizer::Kind::kNmt}};
  for (const auto& [name, kind] : kKinds) {
    if (type == name) {
      out->kind = kind;
      return true;
    }
  }
  return false;
}

}  // namespace

// Replace keeps the origin unless its first match starts the text and removes its first
// character without a replacement, or more than one character (tokenizers aligns the replacement
// with the last character it removed).
Status Normalizer::replaceKeepsOrigin(const std::string& text, bool* keeps_origin) const {
  std::vector<Span> matches;
  REE_RETURN_IF_ERROR(pattern.findAll(text, &matches));
  if (matches.empty() || matches[0].first != 0) return Status::kSuccess;
  size_t characters = 0;
  for (size_t at = 0; at < matches[0].second; ++characters)
    nextCodePoint(text, &at);
  if (characters > 1 || content.empty()) *keeps_origin = false;
  return Status::kSuccess;
}

// Whether this filter (Nmt, Strip, StripAccents: tokenizers' NormalizedString::filter) removes
// the first character of `text`.
bool Normalizer::filtersFirst(const std::string& text) const {
  if (text.empty()) return false;
  size_t at = 0;
  const uint32_t first = nextCodePoint(text, &at);
  switch (kind) {
    case Kind::kNmt:
      return nmtRemoves(first);
    case Kind::kStrip:
      return strip_left && isUnicodeWhitespace(first);
    case Kind::kStripAccents:
      return isCombiningMark(first);
    default:
      return false;
  }
}

Status Normalizer::apply(std::string* text, bool* keeps_origin) const {
  bool unused = true;
  if (keeps_origin == nullptr) keeps_origin = &unused;
  if (*keeps_origin && filtersFirst(*text)) *keeps_origin = false;
  return applyOnly(text, keeps_origin);
}

Status Normalizer::applyOnly(std::string* text, bool* keeps_origin) const {
  switch (kind) {
    case Kind::kSequence:
      for (const Normalizer& child : children)
        REE_RETURN_IF_ERROR(child.apply(text, keeps_origin));
      return Status::kSuccess;
    case Kind::kPrepend:
      if (!text->empty()) text->insert(0, content);
      return Status::kSuccess;
    case Kind::kReplace:
      if (*keeps_origin) REE_RETURN_IF_ERROR(replaceKeepsOrigin(*text, keeps_origin));
      return replaceAll(pattern, text, content);
    case Kind::kUnicodeForm:
      return normalizeUnicode(form, text);
    case Kind::kLowercase:
      *text = lowercaseUnicode(*text);
      return Status::kSuccess;
    case Kind::kStrip:
      *text = stripWhitespace(*text, strip_left, strip_right);
      return Status::kSuccess;
    case Kind::kStripAccents:
      *text = withoutCombiningMarks(*text);
      return Status::kSuccess;
    case Kind::kNmt:
      *text = nmtNormalize(*text);
      return Status::kSuccess;
    case Kind::kPrecompiled:
      return charsmap->apply(text);
  }
  return Status::kSuccess;
}

Status parseNormalizer(const LoadContext& ctx, const json& object, const std::string& field,
                       Normalizer* out) {
  std::string type;
  REE_RETURN_IF_ERROR(ctx.getType(object, field, &type));
  if (type == "Sequence") return parseSequence(ctx, object, field, out);
  if (type == "Prepend") {
    out->kind = Normalizer::Kind::kPrepend;
    return ctx.getRequiredString(object, "prepend", field, &out->content);
  }
  if (type == "Replace") return parseReplace(ctx, object, field, out);
  if (type == "Strip") {
    out->kind = Normalizer::Kind::kStrip;
    REE_RETURN_IF_ERROR(ctx.getRequiredBool(object, "strip_left", field, &out->strip_left));
    return ctx.getRequiredBool(object, "strip_right", field, &out->strip_right);
  }
  if (type == "Precompiled") {
    out->kind = Normalizer::Kind::kPrecompiled;
    auto charsmap = std::make_shared<PrecompiledCharsmap>();
    REE_RETURN_IF_ERROR(PrecompiledCharsmap::parse(ctx, object, field, charsmap.get()));
    out->charsmap = std::move(charsmap);
    return Status::kSuccess;
  }
  if (parseSimple(type, out)) return Status::kSuccess;
  return ctx.unsupported(field + ".type",
                         "unsupported normalizer '" + type +
                             "' (supported: Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD, "
                             "Lowercase, Strip, StripAccents, Nmt, Precompiled)");
}

}  // namespace ree::models::tokenizer_internal
