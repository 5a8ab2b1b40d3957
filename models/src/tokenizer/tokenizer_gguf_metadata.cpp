// Reading and checking a GGUF file's tokenizer.ggml.* keys (tokenizer_gguf.h): every type, length,
// id and string is checked here, with the key in the message, before a tokenizer is built.
#include <cmath>
#include <cstring>
#include <unordered_set>

#include "ree/core/text.h"
#include "tokenizer_gguf.h"
#include "tokenizer_load.h"
#include "tokenizer_text.h"

namespace ree::models::tokenizer_internal {
namespace {

// The tokenizer.json limits (tokenizer_load.h) bound the metadata too.
Status keyError(const GgufTokenizerMetadata& meta, Status status, const std::string& key,
                const std::string& what) {
  return REE_FAIL(status, "GGUF file '%s': metadata key '%s' %s", meta.shown_path.c_str(),
                  key.c_str(), what.c_str());
}

// An array of `element`-typed values (any of `accepted`), or null when the key is absent.
Status findArray(const GgufFile& file, const GgufTokenizerMetadata& meta, const std::string& key,
                 std::initializer_list<GgufValueType> accepted, const GgufValue** out) {
  *out = file.find(key);
  if (*out == nullptr) return Status::kSuccess;
  if ((*out)->type != GgufValueType::kArray) {
    return keyError(meta, Status::kIoError, key,
                    std::string("has type ") + ggufValueTypeName((*out)->type) + ", not an array");
  }
  for (GgufValueType type : accepted) {
    if ((*out)->element_type == type) return Status::kSuccess;
  }
  return keyError(meta, Status::kIoError, key,
                  std::string("is an array of ") + ggufValueTypeName((*out)->element_type) +
                      ", not of " + ggufValueTypeName(*accepted.begin()));
}

Status readString(const GgufFile& file, GgufTokenizerMetadata& meta, const std::string& key,
                  bool required, std::string* out) {
  if (file.find(key) == nullptr && !required) return Status::kSuccess;
  REE_RETURN_IF_ERROR(file.string(key, out));
  if (!text::isValidUtf8(*out)) return keyError(meta, Status::kIoError, key, "is not valid UTF-8");
  return Status::kSuccess;
}

Status readBool(const GgufFile& file, const GgufTokenizerMetadata& meta, const std::string& key,
                std::optional<bool>* out) {
  const GgufValue* value = file.find(key);
  if (value == nullptr) return Status::kSuccess;
  if (value->type != GgufValueType::kBool) {
    return keyError(meta, Status::kIoError, key,
                    std::string("has type ") + ggufValueTypeName(value->type) + ", not BOOL");
  }
  if (value->scalar > 1) {
    return keyError(meta, Status::kIoError, key,
                    "is " + std::to_string(value->scalar) + ", not a boolean (0 or 1)");
  }
  *out = value->scalar != 0;
  return Status::kSuccess;
}

Status readTokens(const GgufFile& file, GgufTokenizerMetadata& meta) {
  const std::string key = "tokenizer.ggml.tokens";
  const GgufValue* value = nullptr;
  REE_RETURN_IF_ERROR(findArray(file, meta, key, {GgufValueType::kString}, &value));
  if (value == nullptr) return keyError(meta, Status::kIoError, key, "is missing");
  if (value->count == 0 || value->count > kMaxVocabEntries) {
    return keyError(meta, Status::kIoError, key,
                    "lists " + std::to_string(value->count) + " tokens, not within [1, " +
                        std::to_string(kMaxVocabEntries) + "]");
  }
  for (size_t i = 0; i < value->strings.size(); ++i) {
    const std::string_view token = value->strings[i];
    const std::string where = "entry " + std::to_string(i);
    if (token.size() > kMaxTokenBytes) {
      return keyError(meta, Status::kIoError, key,
                      where + " has " + std::to_string(token.size()) +
                          " bytes, over the limit of " + std::to_string(kMaxTokenBytes));
    }
    if (!text::isValidUtf8(token)) {
      return keyError(meta, Status::kIoError, key, where + " is not valid UTF-8");
    }
  }
  meta.tokens = value->strings;
  return Status::kSuccess;
}

// The little-endian element `i` of a numeric array as an integer (`type` an integer type).
int64_t integerElement(const GgufValue& value, size_t i) {
  const unsigned char* p = value.elements;
  switch (value.element_type) {
    case GgufValueType::kU8:
      return p[i];
    case GgufValueType::kI8:
      return static_cast<int8_t>(p[i]);
    case GgufValueType::kU16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return v;
    }
    case GgufValueType::kI16: {
      int16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return v;
    }
    case GgufValueType::kU32: {
      uint32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case GgufValueType::kI32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case GgufValueType::kU64: {
      uint64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
    }
    default: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
  }
}

Status readTokenTypes(const GgufFile& file, GgufTokenizerMetadata& meta) {
  const std::string key = "tokenizer.ggml.token_type";
  const GgufValue* value = nullptr;
  REE_RETURN_IF_ERROR(findArray(
      file, meta, key,
      {GgufValueType::kI32, GgufValueType::kU32, GgufValueType::kI8, GgufValueType::kU8,
       GgufValueType::kI16, GgufValueType::kU16, GgufValueType::kI64, GgufValueType::kU64},
      &value));
  if (value == nullptr) return Status::kSuccess;
  if (value->count != meta.tokens.size()) {
    return keyError(meta, Status::kIoError, key,
                    "has " + std::to_string(value->count) +
                        " entries, but tokenizer.ggml.tokens has " +
                        std::to_string(meta.tokens.size()));
  }
  meta.token_types.resize(meta.tokens.size());
  for (size_t i = 0; i < meta.token_types.size(); ++i) {
    const int64_t type = integerElement(*value, i);
    if (type < kGgufTokenUndefined || type > kGgufTokenByte) {
      return keyError(meta, Status::kIoError, key,
                      "entry " + std::to_string(i) + " is " + std::to_string(type) +
                          ", not a token type (0 to 6)");
    }
    meta.token_types[i] = static_cast<int32_t>(type);
  }
  return Status::kSuccess;
}

Status readScores(const GgufFile& file, GgufTokenizerMetadata& meta) {
  const std::string key = "tokenizer.ggml.scores";
  const GgufValue* value = nullptr;
  REE_RETURN_IF_ERROR(findArray(file, meta, key, {GgufValueType::kF32}, &value));
  if (value == nullptr) return Status::kSuccess;
  if (value->count != meta.tokens.size()) {
    return keyError(meta, Status::kIoError, key,
                    "has " + std::to_string(value->count) +
                        " entries, but tokenizer.ggml.tokens has " +
                        std::to_string(meta.tokens.size()));
  }
  meta.scores.resize(meta.tokens.size());
  std::memcpy(meta.scores.data(), value->elements, meta.scores.size() * sizeof(float));
  for (size_t i = 0; i < meta.scores.size(); ++i) {
    if (!std::isfinite(meta.scores[i])) {
      return keyError(meta, Status::kIoError, key,
                      "entry " + std::to_string(i) + " is not a finite number");
    }
  }
  return Status::kSuccess;
}

// Merges "a b": exactly one space, both sides and their concatenation vocabulary tokens (as
// tokenizers requires of a BPE model).
Status readMerges(const GgufFile& file, GgufTokenizerMetadata& meta) {
  const std::string key = "tokenizer.ggml.merges";
  const GgufValue* value = nullptr;
  REE_RETURN_IF_ERROR(findArray(file, meta, key, {GgufValueType::kString}, &value));
  if (value == nullptr) return Status::kSuccess;
  if (value->count > kMaxMerges) {
    return keyError(meta, Status::kIoError, key,
                    "lists " + std::to_string(value->count) + " merges, over the limit of " +
                        std::to_string(kMaxMerges));
  }
  std::unordered_set<std::string_view> vocabulary(meta.tokens.begin(), meta.tokens.end());
  meta.has_merges = true;
  meta.merges.reserve(value->strings.size());
  std::string joined;
  for (size_t i = 0; i < value->strings.size(); ++i) {
    const std::string_view merge = value->strings[i];
    const size_t space = merge.find(' ');
    const std::string where =
        "entry " + std::to_string(i) + " " + printableText(std::string(merge), 80);
    if (space == 0 || space == std::string_view::npos || space + 1 == merge.size() ||
        merge.find(' ', space + 1) != std::string_view::npos) {
      return keyError(meta, Status::kIoError, key, where + " is not two tokens joined by a space");
    }
    const std::string_view left = merge.substr(0, space), right = merge.substr(space + 1);
    joined.assign(left).append(right);
    if (!vocabulary.count(left) || !vocabulary.count(right) || !vocabulary.count(joined)) {
      return keyError(meta, Status::kIoError, key,
                      where + " names a token, or makes one, that tokenizer.ggml.tokens lacks");
    }
    meta.merges.emplace_back(left, right);
  }
  return Status::kSuccess;
}

Status readTokenIds(const GgufFile& file, GgufTokenizerMetadata& meta) {
  struct IdKey {
    const char* key;
    std::optional<int64_t>* id;
  };
  const IdKey keys[] = {
      {"tokenizer.ggml.bos_token_id", &meta.bos_id},
      {"tokenizer.ggml.eos_token_id", &meta.eos_id},
      {"tokenizer.ggml.eot_token_id", &meta.eot_id},
      {"tokenizer.ggml.eom_token_id", &meta.eom_id},
      {"tokenizer.ggml.unknown_token_id", &meta.unk_id},
      {"tokenizer.ggml.padding_token_id", &meta.pad_id},
  };
  for (const IdKey& entry : keys) {
    if (file.find(entry.key) == nullptr) continue;
    int64_t id = 0;
    REE_RETURN_IF_ERROR(file.integer(entry.key, &id));
    if (id >= static_cast<int64_t>(meta.tokens.size())) {
      return keyError(meta, Status::kInvalidArgument, entry.key,
                      "is " + std::to_string(id) + ", outside tokenizer.ggml.tokens' [0, " +
                          std::to_string(meta.tokens.size()) + ")");
    }
    *entry.id = id;
  }
  return Status::kSuccess;
}

// The tokenizer models REE builds, and the byte-level pre-tokenizer names it maps.
Status checkModelAndPre(GgufTokenizerMetadata& meta) {
  if (meta.model != "gpt2" && meta.model != "llama") {
    return keyError(meta, Status::kUnsupported, "tokenizer.ggml.model",
                    "is '" + printableText(meta.model, 60) +
                        "', unsupported (gpt2: byte-level BPE, llama: SentencePiece BPE)");
  }
  if (meta.architecture != "llama" && meta.architecture != "qwen2" &&
      meta.architecture != "qwen3") {
    return keyError(meta, Status::kUnsupported, "general.architecture",
                    "is '" + printableText(meta.architecture, 60) +
                        "', whose tokenizer REE does not build (llama, qwen2, qwen3)");
  }
  if (meta.model == "llama") return Status::kSuccess;
  static const char* const kKnown[] = {"gpt-2",  "smollm",   "starcoder", "llama-bpe",
                                       "llama3", "llama-v3", "qwen2",     "deepseek-r1-qwen"};
  for (const char* name : kKnown) {
    if (meta.pre == name) return Status::kSuccess;
  }
  return keyError(meta, Status::kUnsupported, "tokenizer.ggml.pre",
                  meta.pre.empty()
                      ? std::string("is missing (a byte-level vocabulary needs its pre-tokenizer "
                                    "name)")
                      : "is '" + printableText(meta.pre, 60) +
                            "', a pre-tokenizer REE does not reproduce (gpt-2, smollm, starcoder, "
                            "llama-bpe, llama3, llama-v3, qwen2, deepseek-r1-qwen)");
}

}  // namespace

Status readGgufTokenizerMetadata(const GgufFile& file, GgufTokenizerMetadata* out) {
  GgufTokenizerMetadata& meta = *out;
  meta.shown_path = printableText(file.path(), 400);
  REE_RETURN_IF_ERROR(readString(file, meta, "general.architecture", true, &meta.architecture));
  REE_RETURN_IF_ERROR(readString(file, meta, "tokenizer.ggml.model", true, &meta.model));
  REE_RETURN_IF_ERROR(readString(file, meta, "tokenizer.ggml.pre", false, &meta.pre));
  REE_RETURN_IF_ERROR(checkModelAndPre(meta));
  REE_RETURN_IF_ERROR(readTokens(file, meta));
  REE_RETURN_IF_ERROR(readTokenTypes(file, meta));
  REE_RETURN_IF_ERROR(readScores(file, meta));
  REE_RETURN_IF_ERROR(readMerges(file, meta));
  if (meta.model == "gpt2" && !meta.has_merges) {
    return keyError(meta, Status::kIoError, "tokenizer.ggml.merges",
                    "is missing (a gpt2 vocabulary needs its merges)");
  }
  if (meta.model == "llama" && !meta.has_merges && meta.scores.empty()) {
    return keyError(meta, Status::kIoError, "tokenizer.ggml.scores",
                    "is missing (a llama vocabulary without tokenizer.ggml.merges needs its "
                    "scores)");
  }
  REE_RETURN_IF_ERROR(readTokenIds(file, meta));
  REE_RETURN_IF_ERROR(readBool(file, meta, "tokenizer.ggml.add_bos_token", &meta.add_bos));
  REE_RETURN_IF_ERROR(readBool(file, meta, "tokenizer.ggml.add_eos_token", &meta.add_eos));
  return readBool(file, meta, "tokenizer.ggml.add_space_prefix", &meta.add_space_prefix);
}

}  // namespace ree::models::tokenizer_internal
