// Internal to the tokenizer: normalizers (Sequence, Prepend, Replace, the Unicode normalization
// forms NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents, Nmt, Precompiled).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer_load.h"
#include "tokenizer_pattern.h"
#include "tokenizer_precompiled.h"
#include "tokenizer_unicode.h"

namespace ree::models::tokenizer_internal {

struct Normalizer {
  enum class Kind {
    kSequence,
    kPrepend,
    kReplace,
    kUnicodeForm,
    kLowercase,
    kStrip,
    kStripAccents,
    kNmt,
    kPrecompiled
  } kind = Kind::kSequence;
  std::vector<Normalizer> children;
  std::string content;  // Prepend: prefix; Replace: replacement
  Pattern pattern;
  NormalizationForm form = NormalizationForm::kNfc;     // kUnicodeForm
  bool strip_left = false, strip_right = false;         // kStrip
  std::shared_ptr<const PrecompiledCharsmap> charsmap;  // kPrecompiled

  // `*keeps_origin` (optional) becomes false when the first character of the result no longer
  // stands at offset 0 of the text for tokenizers' alignments (Metaspace's prepend_scheme "first"
  // asks): a filter (Nmt, Strip, StripAccents) removed the first character, or a Replace matched
  // at the start and removed it, or more than one character there. Precompiled's removals at the
  // start keep it (its alignments lose them), as do the other normalizers.
  Status apply(std::string* text, bool* keeps_origin = nullptr) const;

 private:
  Status applyOnly(std::string* text, bool* keeps_origin) const;
  Status replaceKeepsOrigin(const std::string& text, bool* keeps_origin) const;
  bool filtersFirst(const std::string& text) const;
};

Status parseNormalizer(const LoadContext& ctx, const json& object, const std::string& field,
                       Normalizer* out);

}  // namespace ree::models::tokenizer_internal
