// Normalizers: Sequence, Prepend, Replace (see tokenizer_normalizer.h).
#include "tokenizer_normalizer.h"

namespace ree::models::tokenizer_internal {

Status Normalizer::apply(std::string* text) const {
  switch (kind) {
    case Kind::kSequence:
      for (const Normalizer& child : children)
        REE_RETURN_IF_ERROR(child.apply(text));
      return Status::kSuccess;
    case Kind::kPrepend:
      if (!text->empty()) text->insert(0, content);
      return Status::kSuccess;
    case Kind::kReplace:
      return replaceAll(pattern, text, content);
  }
  return Status::kSuccess;
}

Status parseNormalizer(const LoadContext& ctx, const json& object, const std::string& field,
                       Normalizer* out) {
  std::string type;
  REE_RETURN_IF_ERROR(ctx.getType(object, field, &type));
  if (type == "Sequence") {
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
  if (type == "Prepend") {
    out->kind = Normalizer::Kind::kPrepend;
    return ctx.getString(object, "prepend", field, &out->content);
  }
  if (type == "Replace") {
    out->kind = Normalizer::Kind::kReplace;
    REE_RETURN_IF_ERROR(ctx.getString(object, "content", field, &out->content));
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
  return ctx.unsupported(field + ".type",
                         "unsupported normalizer '" + type +
                             "' (supported: Sequence, Prepend, Replace; Unicode normalization "
                             "forms such as NFC need tables this build does not carry)");
}

}  // namespace ree::models::tokenizer_internal
