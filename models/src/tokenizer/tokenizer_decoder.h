// Internal to the tokenizer: decoders (Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip,
// Metaspace), which turn the token strings of decode() into text.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tokenizer_load.h"
#include "tokenizer_pattern.h"
#include "tokenizer_pre_tokenizer.h"

namespace ree::models::tokenizer_internal {

struct Decoder {
  enum class Kind {
    kSequence,
    kByteLevel,
    kReplace,
    kByteFallback,
    kFuse,
    kStrip,
    kMetaspace
  } kind = Kind::kSequence;
  std::vector<Decoder> children;
  Pattern pattern;      // Replace
  std::string content;  // Replace: replacement; Strip: the stripped character; Metaspace: ▁
  size_t strip_start = 0, strip_stop = 0;
  PrependScheme prepend_scheme = PrependScheme::kAlways;

  // tokenizers' decode_chain: the tokens after this decoder.
  Status apply(std::vector<std::string>* tokens) const;
};

Status parseDecoder(const LoadContext& ctx, const json& object, const std::string& field,
                    Decoder* out);

}  // namespace ree::models::tokenizer_internal
