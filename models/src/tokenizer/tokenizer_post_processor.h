// Internal to the tokenizer: post-processors (Sequence, ByteLevel, TemplateProcessing), run by
// encode(add_special_tokens = true).
#pragma once

#include <functional>

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

// Every special token id of a template must name a token (`names_token`: of the model vocabulary
// or the added tokens, which may leave gaps below `vocab_size`), since encode emits those ids as
// they are.
// Whether an id names a token, and one past the largest id (for the message).
struct TokenIdCheck {
  std::function<bool(int32_t)> names_token;
  int32_t vocab_size = 0;
};

Status parsePostProcessor(const LoadContext& ctx, const json& object, const std::string& field,
                          const TokenIdCheck& names_token, PostProcessor* out);

}  // namespace ree::models::tokenizer_internal
