// Internal to the tokenizer: a GGUF file's tokenizer.ggml.* metadata, read and checked
// (tokenizer_gguf_metadata.cpp), the merges a SentencePiece vocabulary implies
// (tokenizer_gguf_merges.cpp), and the tokenizer.json built from them (tokenizer_gguf.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ree/core/status.h"
#include "ree/models/gguf.h"

namespace ree::models::tokenizer_internal {

// llama.cpp's token types (tokenizer.ggml.token_type).
enum GgufTokenType : int32_t {
  kGgufTokenUndefined = 0,
  kGgufTokenNormal = 1,
  kGgufTokenUnknown = 2,
  kGgufTokenControl = 3,
  kGgufTokenUserDefined = 4,
  kGgufTokenUnused = 5,
  kGgufTokenByte = 6,
};

struct GgufTokenizerMetadata {
  std::string shown_path;                // the file, printable, for messages
  std::string architecture;              // general.architecture
  std::string model;                     // tokenizer.ggml.model: "gpt2" or "llama"
  std::string pre;                       // tokenizer.ggml.pre ("" when absent)
  std::vector<std::string_view> tokens;  // point into the file's mapping
  std::vector<int32_t> token_types;      // empty when absent
  std::vector<float> scores;             // empty when absent
  std::vector<std::pair<std::string_view, std::string_view>> merges;  // empty when absent
  bool has_merges = false;
  std::optional<int64_t> bos_id, eos_id, eot_id, eom_id, unk_id, pad_id;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

// Reads and checks the tokenizer keys of `file` (kIoError: malformed, kUnsupported: a model or
// pre-tokenizer REE does not reproduce), each message naming the file and the key.
Status readGgufTokenizerMetadata(const GgufFile& file, GgufTokenizerMetadata* out);

// transformers' GGUFTokenizerSkeleton: the merges of a SentencePiece vocabulary without
// tokenizer.ggml.merges, from the scores. For each distinct token (first occurrence order), every
// split into two vocabulary tokens, ordered by the pieces' scores (descending, stable); then all
// of them ordered by the token's score (descending, stable). A token repeated in the list counts
// with its last score, as in the Python dict.
std::vector<std::pair<std::string, std::string>> mergesFromScores(
    const std::vector<std::string_view>& tokens, const std::vector<float>& scores);

}  // namespace ree::models::tokenizer_internal
