// Internal to the tokenizer: the Precompiled normalizer, SentencePiece's compiled normalization
// rules (a double-array trie from UTF-8 sequences to their replacements) as tokenizers applies
// them (the spm_precompiled crate): text cut into extended grapheme clusters; a cluster shorter
// than 6 bytes is looked up whole, else (or when the whole finds nothing) character by
// character; a lookup takes the shortest rule that prefixes its input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer_load.h"

namespace ree::models::tokenizer_internal {

class PrecompiledCharsmap {
 public:
  // Decodes precompiled_charsmap (base64 of: little-endian u32 trie byte size, the trie's u32
  // units, the NUL-separated replacements). Refuses what tokenizers refuses (invalid base64, a
  // short blob, replacements that are not UTF-8) and an empty trie (tokenizers panics on it).
  static Status parse(const LoadContext& ctx, const json& object, const std::string& field,
                      PrecompiledCharsmap* out);

  // Normalizes `text` in place. Fails (kInvalidArgument) where tokenizers panics: a rule that
  // leads outside the trie or the replacements.
  Status apply(std::string* text) const;

 private:
  // The replacement of the shortest rule that prefixes `chunk` (stopping at a NUL byte); false
  // in `*found` when none does.
  Status transform(std::string_view chunk, bool* found, std::string_view* replacement) const;

  std::vector<uint32_t> trie_;
  std::string replacements_;
};

}  // namespace ree::models::tokenizer_internal
