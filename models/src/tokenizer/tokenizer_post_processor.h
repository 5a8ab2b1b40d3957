// Internal to the tokenizer: post-processors (Sequence, ByteLevel, TemplateProcessing), run by
// encode(add_special_tokens = true).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer_load.h"

namespace ree::models::tokenizer_internal {

struct PostProcessor {
  enum class Kind { kSequence, kByteLevel, kTemplate } kind = Kind::kSequence;
  std::vector<PostProcessor> children;
  // Template "single": each item is either the sequence (is_sequence) or special token ids.
  struct Item {
    bool is_sequence = false;
    std::vector<int32_t> ids;
  };
  std::vector<Item> single;

  void apply(std::vector<int32_t>* ids) const;
};

// `vocab_size` (model and added tokens): every special token id of a template must be below it,
// since encode emits those ids as they are.
Status parsePostProcessor(const LoadContext& ctx, const json& object, const std::string& field,
                          int32_t vocab_size, PostProcessor* out);

}  // namespace ree::models::tokenizer_internal
