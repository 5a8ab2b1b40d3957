// Internal to the tokenizer (not installed): what every tokenizer.json stage parser shares, the
// limits a file must stay within and the error helper that names the file and the JSON field.
//
// The tokenizer is split by pipeline stage, each with its parser next to the code it configures:
//   tokenizer_added      added/special tokens: ids, leftmost-longest matching, lstrip/rstrip
//   tokenizer_normalizer Sequence, Prepend, Replace, NFC/NFD/NFKC/NFKD, Lowercase, Strip, ...
//   tokenizer_unicode    the Unicode operations of the normalizers (utf8proc)
//   tokenizer_precompiled  the Precompiled normalizer (SentencePiece's compiled rules)
//   tokenizer_pre_tokenizer  Sequence, Split, ByteLevel, Metaspace
//   tokenizer_model      the model stage: BPE or Unigram by "type"
//   tokenizer_bpe        the BPE model (vocabulary, merges, byte fallback, unk)
//   tokenizer_unigram    the Unigram model (pieces with scores, Viterbi, byte fallback, unk)
//   tokenizer_post_processor  TemplateProcessing and friends
//   tokenizer_decoder    ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace
//   tokenizer_load       reads tokenizer.json and assembles the stages (Tokenizer::Impl)
//   tokenizer            the public API: encode/decode pipelines and DecodeStream
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "ree/core/status.h"

namespace ree::models::tokenizer_internal {

using json = nlohmann::json;

// Limits on a tokenizer.json (docs/tokenizer.md). Each is far above the largest real tokenizer
// (Gemma 3: 33 MB, 262,144 tokens; Llama 3 patterns are ~150 bytes) and bounds what a hostile
// file can make REE allocate or compute.
inline constexpr uint64_t kMaxFileBytes = uint64_t{128} << 20;  // 128 MiB
inline constexpr size_t kMaxVocabEntries = size_t{1} << 22;     // model.vocab: 4,194,304
inline constexpr size_t kMaxMerges = size_t{1} << 23;           // model.merges: 8,388,608
inline constexpr size_t kMaxAddedTokens = size_t{1} << 18;      // added_tokens: 262,144
inline constexpr size_t kMaxTokenBytes = size_t{1} << 16;       // one token's text: 65,536
inline constexpr size_t kMaxRegexBytes = size_t{1} << 14;       // one Regex pattern: 16,384
inline constexpr size_t kMaxOptionBytes = 1024;  // other strings (prepend, content, ...)
// Sequence components, TemplateProcessing items, ids of one template special token.
inline constexpr size_t kMaxListItems = 1024;

// Load errors: always name the file and the JSON field.
struct LoadContext {
  std::string source;

  Status fail(Status status, const std::string& field, const std::string& what) const;
  Status unsupported(const std::string& field, const std::string& what) const {
    return fail(Status::kUnsupported, field, what);
  }
  Status malformed(const std::string& field, const std::string& what) const {
    return fail(Status::kIoError, field, what);
  }
  // "field: N is over the limit of M <what>".
  Status overLimit(const std::string& field, size_t count, size_t limit, const char* what) const;

  // Optional typed members: absent or null keeps the default. Strings longer than `max_bytes`
  // are refused.
  Status getString(const json& object, const std::string& key, const std::string& field,
                   std::string* out, bool* present = nullptr,
                   size_t max_bytes = kMaxOptionBytes) const;
  Status getBool(const json& object, const std::string& key, const std::string& field,
                 bool* out) const;
  // A boolean that must be present (tokenizers refuses the file without it).
  Status getRequiredBool(const json& object, const std::string& key, const std::string& field,
                         bool* out) const;
  // A string or unsigned integer that must be present and not null (tokenizers refuses the file
  // without it).
  Status getRequiredString(const json& object, const std::string& key, const std::string& field,
                           std::string* out, size_t max_bytes = kMaxOptionBytes) const;
  Status getRequiredSize(const json& object, const std::string& key, const std::string& field,
                         size_t* out) const;
  Status getSize(const json& object, const std::string& key, const std::string& field,
                 size_t* out) const;
  Status getType(const json& object, const std::string& field, std::string* type) const;
  // The array `object[key]` (required), at most `max_items` long.
  Status getArray(const json& object, const std::string& key, const std::string& field,
                  size_t max_items, const json** array) const;
};

// The fields of a ByteLevel decoder or post-processor as tokenizers reads them (one struct for
// both): add_prefix_space and trim_offsets required booleans, use_regex an optional boolean. Their
// values change no id or text that REE computes; a file without them is refused as tokenizers
// refuses it.
Status checkByteLevelFields(const LoadContext& ctx, const json& object, const std::string& field);

// `field[index]`, the name of an array element in messages.
inline std::string elementField(const std::string& field, size_t index) {
  return field + "[" + std::to_string(index) + "]";
}

}  // namespace ree::models::tokenizer_internal
