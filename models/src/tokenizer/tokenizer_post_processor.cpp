// Post-processors: Sequence, ByteLevel (offsets only: no ids change), TemplateProcessing.
#include "tokenizer_post_processor.h"

#include "ree/core/text.h"

namespace ree::models::tokenizer_internal {
namespace {

// The ids of special token `name` in the template's special_tokens map.
Status specialTokenIds(const LoadContext& ctx, const json* special_tokens, const std::string& name,
                       const std::string& field, const TokenIdCheck& check,
                       std::vector<int32_t>* ids) {
  const std::string map_field = field + ".special_tokens";
  if (!special_tokens || !special_tokens->contains(name) || !(*special_tokens)[name].is_object()) {
    return ctx.malformed(map_field, "no ids for '" + name + "'");
  }
  const json* list = nullptr;
  REE_RETURN_IF_ERROR(
      ctx.getArray((*special_tokens)[name], "ids", map_field + "." + name, kMaxListItems, &list));
  const std::string ids_field = map_field + "." + name + ".ids";
  for (size_t i = 0; i < list->size(); ++i) {
    const json& value = (*list)[i];
    if (!value.is_number_unsigned() || value.get<uint64_t>() > INT32_MAX) {
      return ctx.malformed(ids_field, "expected token ids");
    }
    const auto id = value.get<int32_t>();
    if (id >= check.vocab_size || !check.names_token(id)) {
      return ctx.malformed(elementField(ids_field, i),
                           "special token '" + name + "' has id " + std::to_string(id) +
                               ", which names no token of the vocabulary (ids 0.." +
                               std::to_string(check.vocab_size - 1) + ")");
    }
    ids->push_back(id);
  }
  return Status::kSuccess;
}

// One item of a template as tokenizers reads it: {"Sequence": {"id": "A"|"B", "type_id": n}} or
// {"SpecialToken": {"id": "...", "type_id": n}}, nothing else.
Status checkTemplateItem(const LoadContext& ctx, const json& item, const std::string& field) {
  if (!item.is_object() || item.size() != 1 ||
      !(item.contains("Sequence") || item.contains("SpecialToken"))) {
    return ctx.malformed(field, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
  }
  const bool sequence = item.contains("Sequence");
  const std::string inner_field = field + (sequence ? ".Sequence" : ".SpecialToken");
  const json& inner = sequence ? item["Sequence"] : item["SpecialToken"];
  if (!inner.is_object()) return ctx.malformed(inner_field, "expected an object");
  for (const auto& [key, value] : inner.items()) {
    if (key != "id" && key != "type_id") {
      return ctx.malformed(inner_field + "." + key, "unknown field (tokenizers refuses it)");
    }
  }
  if (!inner.contains("type_id") || !inner["type_id"].is_number_unsigned() ||
      inner["type_id"].get<uint64_t>() > UINT32_MAX) {
    return ctx.malformed(inner_field + ".type_id", "expected a non-negative integer");
  }
  if (!inner.contains("id") || !inner["id"].is_string()) {
    return ctx.malformed(inner_field + ".id", "expected a string");
  }
  const std::string id = inner["id"].get<std::string>();
  if (sequence && id != "A" && id != "B") {
    return ctx.malformed(inner_field + ".id", "expected \"A\" or \"B\"");
  }
  return Status::kSuccess;
}

Status checkTemplateItems(const LoadContext& ctx, const json& object, const std::string& key,
                          const std::string& field) {
  const json* list = nullptr;
  REE_RETURN_IF_ERROR(ctx.getArray(object, key, field, kMaxListItems, &list));
  for (size_t i = 0; i < list->size(); ++i) {
    REE_RETURN_IF_ERROR(checkTemplateItem(ctx, (*list)[i], elementField(field + "." + key, i)));
  }
  return Status::kSuccess;
}

Status parseTemplate(const LoadContext& ctx, const json& object, const std::string& field,
                     const TokenIdCheck& check, PostProcessor* out) {
  out->kind = PostProcessor::Kind::kTemplate;
  REE_RETURN_IF_ERROR(checkTemplateItems(ctx, object, "single", field));
  REE_RETURN_IF_ERROR(checkTemplateItems(ctx, object, "pair", field));
  const json* single = nullptr;
  REE_RETURN_IF_ERROR(ctx.getArray(object, "single", field, kMaxListItems, &single));
  const json* special_tokens = nullptr;
  if (object.contains("special_tokens") && object["special_tokens"].is_object()) {
    special_tokens = &object["special_tokens"];
  }
  for (size_t i = 0; i < single->size(); ++i) {
    const std::string item_field = elementField(field + ".single", i);
    const json& item = (*single)[i];
    PostProcessor::Item parsed;
    if (item.contains("Sequence") && item["Sequence"].is_object()) {
      std::string id;
      REE_RETURN_IF_ERROR(ctx.getString(item["Sequence"], "id", item_field + ".Sequence", &id));
      if (id != "A") {
        return ctx.unsupported(item_field + ".Sequence.id",
                               "sequence '" + id + "' in a single-sequence template");
      }
      parsed.is_sequence = true;
    } else if (item.contains("SpecialToken") && item["SpecialToken"].is_object()) {
      std::string id;
      REE_RETURN_IF_ERROR(ctx.getString(item["SpecialToken"], "id", item_field + ".SpecialToken",
                                        &id, nullptr, kMaxTokenBytes));
      REE_RETURN_IF_ERROR(specialTokenIds(ctx, special_tokens, id, field, check, &parsed.ids));
    } else {
      return ctx.malformed(item_field, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
    out->single.push_back(std::move(parsed));
  }
  return Status::kSuccess;
}

}  // namespace

void PostProcessor::apply(std::vector<int32_t>* ids) const {
  if (kind == Kind::kSequence) {
    for (const PostProcessor& child : children)
      child.apply(ids);
  } else if (kind == Kind::kTemplate) {
    std::vector<int32_t> out;
    for (const Item& item : single) {
      if (item.is_sequence) {
        out.insert(out.end(), ids->begin(), ids->end());
      } else {
        out.insert(out.end(), item.ids.begin(), item.ids.end());
      }
    }
    *ids = std::move(out);
  }
}

Status parsePostProcessor(const LoadContext& ctx, const json& object, const std::string& field,
                          const TokenIdCheck& check, PostProcessor* out) {
  std::string type;
  REE_RETURN_IF_ERROR(ctx.getType(object, field, &type));
  if (type == "Sequence") {
    out->kind = PostProcessor::Kind::kSequence;
    const json* list = nullptr;
    REE_RETURN_IF_ERROR(ctx.getArray(object, "processors", field, kMaxListItems, &list));
    for (size_t i = 0; i < list->size(); ++i) {
      PostProcessor child;
      REE_RETURN_IF_ERROR(parsePostProcessor(
          ctx, (*list)[i], elementField(field + ".processors", i), check, &child));
      out->children.push_back(std::move(child));
    }
    return Status::kSuccess;
  }
  if (type == "ByteLevel") {
    out->kind = PostProcessor::Kind::kByteLevel;
    return checkByteLevelFields(ctx, object, field);
  }
  if (type == "TemplateProcessing") return parseTemplate(ctx, object, field, check, out);
  return ctx.unsupported(field + ".type", "unsupported post-processor '" + type +
                                              "' (supported: Sequence, ByteLevel, "
                                              "TemplateProcessing)");
}

}  // namespace ree::models::tokenizer_internal
