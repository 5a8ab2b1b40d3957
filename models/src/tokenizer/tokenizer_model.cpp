// The model stage (see tokenizer_model.h).
#include "tokenizer_model.h"

namespace ree::models::tokenizer_internal {

Status parseModel(const LoadContext& ctx, const json& model, const std::string& json_text,
                  Model* out) {
  if (!model.is_object()) return ctx.malformed("model", "expected an object");
  std::string type = "BPE";
  REE_RETURN_IF_ERROR(ctx.getString(model, "type", "model", &type));
  if (type == "BPE") {
    out->kind = Model::Kind::kBpe;
    return parseBpe(ctx, model, &out->bpe);
  }
  if (type == "Unigram") {
    out->kind = Model::Kind::kUnigram;
    return parseUnigram(ctx, model, json_text, &out->unigram);
  }
  return ctx.unsupported("model.type",
                         "unsupported model type '" + type + "' (supported: BPE, Unigram)");
}

}  // namespace ree::models::tokenizer_internal
