// Internal to the tokenizer: normalizers (Sequence, Prepend, Replace).
#pragma once

#include <string>
#include <vector>

#include "tokenizer_load.h"
#include "tokenizer_pattern.h"

namespace ree::models::tokenizer_internal {

struct Normalizer {
  enum class Kind { kSequence, kPrepend, kReplace } kind = Kind::kSequence;
  std::vector<Normalizer> children;
  std::string content;  // Prepend: prefix; Replace: replacement
  Pattern pattern;

  Status apply(std::string* text) const;
};

Status parseNormalizer(const LoadContext& ctx, const json& object, const std::string& field,
                       Normalizer* out);

}  // namespace ree::models::tokenizer_internal
