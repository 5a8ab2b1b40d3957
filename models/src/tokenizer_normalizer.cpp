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
    return parsePattern(ctx, object["pattern"], field + ".pattern", &out->pattern);
  }
  return ctx.unsupported(field + ".type",
                         "unsupported normalizer '" + type +
                             "' (supported: Sequence, Prepend, Replace; Unicode normalization "
                             "forms such as NFC need tables this build does not carry)");
}

}  // namespace ree::models::tokenizer_internal
