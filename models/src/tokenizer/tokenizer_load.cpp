// Reading tokenizer.json and assembling its stages into a Tokenizer::Impl; the LoadContext
// helpers every stage parser uses (see tokenizer_load.h).
#include "tokenizer_load.h"

#include <algorithm>
#include <iterator>

#include "ree/core/file.h"
#include "ree/core/json_guard.h"
#include "ree/core/text.h"
#include "tokenizer_impl.h"

namespace ree::models {
namespace tokenizer_internal {

Status LoadContext::fail(Status status, const std::string& field, const std::string& what) const {
  return REE_FAIL(status, "tokenizer '%s': field '%s': %s", printableText(source, 400).c_str(),
                  printableText(field, 200).c_str(), printableText(what, 600).c_str());
}

Status LoadContext::overLimit(const std::string& field, size_t count, size_t limit,
                              const char* what) const {
  return malformed(
      field, std::to_string(count) + " " + what + " is over the limit of " + std::to_string(limit));
}

Status LoadContext::getString(const json& object, const std::string& key, const std::string& field,
                              std::string* out, bool* present, size_t max_bytes) const {
  if (present) *present = false;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return Status::kSuccess;
  if (!it->is_string()) return malformed(field + "." + key, "expected a string");
  const auto& value = it->get_ref<const std::string&>();
  if (value.size() > max_bytes) {
    return malformed(field + "." + key, std::to_string(value.size()) +
                                            " bytes is over the limit of " +
                                            std::to_string(max_bytes) + " bytes");
  }
  *out = value;
  if (present) *present = true;
  return Status::kSuccess;
}

Status LoadContext::getBool(const json& object, const std::string& key, const std::string& field,
                            bool* out) const {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return Status::kSuccess;
  if (!it->is_boolean()) return malformed(field + "." + key, "expected a boolean");
  *out = it->get<bool>();
  return Status::kSuccess;
}

Status LoadContext::getRequiredBool(const json& object, const std::string& key,
                                    const std::string& field, bool* out) const {
  auto it = object.find(key);
  if (it == object.end()) {
    return malformed(field + "." + key, "missing (tokenizers refuses the file without it)");
  }
  if (!it->is_boolean()) return malformed(field + "." + key, "expected a boolean");
  *out = it->get<bool>();
  return Status::kSuccess;
}

Status LoadContext::getRequiredString(const json& object, const std::string& key,
                                      const std::string& field, std::string* out,
                                      size_t max_bytes) const {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    return malformed(field + "." + key, "missing (tokenizers refuses the file without it)");
  }
  return getString(object, key, field, out, nullptr, max_bytes);
}

Status LoadContext::getRequiredSize(const json& object, const std::string& key,
                                    const std::string& field, size_t* out) const {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    return malformed(field + "." + key, "missing (tokenizers refuses the file without it)");
  }
  return getSize(object, key, field, out);
}

Status checkByteLevelFields(const LoadContext& ctx, const json& object, const std::string& field) {
  bool unused = false;
  REE_RETURN_IF_ERROR(ctx.getRequiredBool(object, "add_prefix_space", field, &unused));
  REE_RETURN_IF_ERROR(ctx.getRequiredBool(object, "trim_offsets", field, &unused));
  return ctx.getBool(object, "use_regex", field, &unused);
}

Status LoadContext::getSize(const json& object, const std::string& key, const std::string& field,
                            size_t* out) const {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return Status::kSuccess;
  if (!it->is_number_unsigned())
    return malformed(field + "." + key, "expected an unsigned integer");
  *out = it->get<size_t>();
  return Status::kSuccess;
}

Status LoadContext::getType(const json& object, const std::string& field, std::string* type) const {
  if (!object.is_object()) return malformed(field, "expected an object or null");
  auto it = object.find("type");
  if (it == object.end() || !it->is_string()) return malformed(field + ".type", "missing");
  return getString(object, "type", field, type);
}

Status LoadContext::getArray(const json& object, const std::string& key, const std::string& field,
                             size_t max_items, const json** array) const {
  auto it = object.find(key);
  if (it == object.end() || !it->is_array())
    return malformed(field + "." + key, "expected an array");
  if (it->size() > max_items) return overLimit(field + "." + key, it->size(), max_items, "items");
  *array = &*it;
  return Status::kSuccess;
}

namespace {

bool present(const json& root, const char* key) {
  return root.contains(key) && !root[key].is_null();
}

// tokenizers refuses a root key it does not know (a misspelt "added_tokens" would otherwise be
// ignored) and any version but "1.0".
Status checkRoot(const LoadContext& ctx, const json& root) {
  static const char* const kKeys[] = {"version",        "truncation", "padding",
                                      "added_tokens",   "normalizer", "pre_tokenizer",
                                      "post_processor", "decoder",    "model"};
  for (const auto& [key, value] : root.items()) {
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
      return ctx.malformed(key, "unknown field (tokenizers refuses the file)");
    }
  }
  if (root.contains("version") &&
      !(root["version"].is_string() && root["version"].get_ref<const std::string&>() == "1.0")) {
    return ctx.unsupported("version", "tokenizer.json version " + root["version"].dump() +
                                          " (tokenizers 0.23 reads version \"1.0\" only)");
  }
  return Status::kSuccess;
}

// The stages in the order their checks depend on: the model first (added token ids derive from
// its vocabulary), the normalizer before the added tokens (their patterns are normalized), the
// post-processor last (its ids are checked against the whole vocabulary).
Status parseStages(const LoadContext& ctx, const json& root, const std::string& json_text,
                   Tokenizer::Impl* impl) {
  if (!root.contains("model")) return ctx.malformed("model", "missing");
  REE_RETURN_IF_ERROR(parseModel(ctx, root["model"], json_text, &impl->model));
  if (present(root, "normalizer")) {
    impl->has_normalizer = true;
    REE_RETURN_IF_ERROR(parseNormalizer(ctx, root["normalizer"], "normalizer", &impl->normalizer));
  }
  if (present(root, "pre_tokenizer")) {
    impl->has_pre_tokenizer = true;
    REE_RETURN_IF_ERROR(
        parsePreTokenizer(ctx, root["pre_tokenizer"], "pre_tokenizer", &impl->pre_tokenizer));
  }
  if (present(root, "decoder")) {
    impl->has_decoder = true;
    REE_RETURN_IF_ERROR(parseDecoder(ctx, root["decoder"], "decoder", &impl->decoder));
  }
  static const json kNoAddedTokens;
  REE_RETURN_IF_ERROR(parseAddedTokens(
      ctx, root.contains("added_tokens") ? root["added_tokens"] : kNoAddedTokens, impl->model,
      impl->has_normalizer ? &impl->normalizer : nullptr, &impl->added, &impl->vocab_size));
  if (present(root, "post_processor")) {
    impl->has_post_processor = true;
    const Tokenizer::Impl& built = *impl;
    TokenIdCheck check{[&built](int32_t id) { return built.tokenOf(id) != nullptr; },
                       impl->vocab_size};
    REE_RETURN_IF_ERROR(parsePostProcessor(ctx, root["post_processor"], "post_processor", check,
                                           &impl->post_processor));
  }
  return Status::kSuccess;
}

}  // namespace

Status parseTokenizer(const std::string& json_text, const std::string& source,
                      std::unique_ptr<Tokenizer::Impl>* out) {
  LoadContext ctx{source};
  // Repeated keys are refused before parsing: nlohmann would keep the last value silently.
  REE_RETURN_IF_ERROR(checkJsonText(json_text, "tokenizer '" + printableText(source, 400) + "'"));
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return REE_FAIL(Status::kIoError, "tokenizer '%s': malformed JSON",
                    printableText(source, 400).c_str());
  }
  if (!root.is_object()) return ctx.malformed("(root)", "expected a JSON object");
  REE_RETURN_IF_ERROR(checkRoot(ctx, root));
  for (const char* key : {"truncation", "padding"}) {
    if (present(root, key)) {
      return ctx.unsupported(key, "must be null (encode returns the whole, unpadded sequence)");
    }
  }
  auto impl = std::make_unique<Tokenizer::Impl>();
  impl->source = source;
  REE_RETURN_IF_ERROR(parseStages(ctx, root, json_text, impl.get()));
  *out = std::move(impl);
  return Status::kSuccess;
}

}  // namespace tokenizer_internal

Status Tokenizer::loadFromString(const std::string& json_text, const std::string& source_name,
                                 std::unique_ptr<Tokenizer>* tokenizer) {
  REE_CHECK_ARG(tokenizer != nullptr, "tokenizer: output pointer is null");
  try {
    std::unique_ptr<Impl> impl;
    REE_RETURN_IF_ERROR(tokenizer_internal::parseTokenizer(json_text, source_name, &impl));
    tokenizer->reset(new Tokenizer(std::move(impl)));
    return Status::kSuccess;
  } catch (const std::bad_alloc&) {
    return REE_FAIL(Status::kOutOfMemory, "tokenizer '%s': out of memory while loading",
                    printableText(source_name, 400).c_str());
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kIoError, "tokenizer '%s': malformed content: %s",
                    printableText(source_name, 400).c_str(), e.what());
  }
}

Status Tokenizer::load(const std::string& path, std::unique_ptr<Tokenizer>* tokenizer) {
  REE_CHECK_ARG(tokenizer != nullptr, "tokenizer: output pointer is null");
  std::string content;
  try {
    // Regular files only, size checked before reading: /dev/zero, a FIFO or a directory are
    // refused with what they are.
    REE_RETURN_IF_ERROR(
        readRegularFile(path, tokenizer_internal::kMaxFileBytes, "tokenizer", &content));
  } catch (const std::bad_alloc&) {
    return REE_FAIL(Status::kOutOfMemory, "tokenizer '%s': out of memory while reading",
                    printableText(path, 400).c_str());
  }
  return loadFromString(content, path, tokenizer);
}

}  // namespace ree::models
