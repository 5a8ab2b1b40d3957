// Internal to the tokenizer: pre-tokenizers (Sequence, Split, ByteLevel, Metaspace,
// WhitespaceSplit).
#pragma once

#include <string>
#include <vector>

#include "tokenizer_load.h"
#include "tokenizer_pattern.h"
#include "tokenizer_piece.h"

namespace ree::models::tokenizer_internal {

// Metaspace's prepend_scheme (also used by the Metaspace decoder).
enum class PrependScheme { kAlways, kFirst, kNever };

struct PreTokenizer {
  enum class Kind {
    kSequence,
    kSplit,
    kByteLevel,
    kMetaspace,
    kWhitespaceSplit
  } kind = Kind::kSequence;
  std::vector<PreTokenizer> children;
  // Split; ByteLevel with use_regex: the GPT-2 regex.
  Pattern pattern;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // ByteLevel
  bool add_prefix_space = false;
  bool use_regex = true;
  // Metaspace
  std::string replacement = "\xE2\x96\x81";  // U+2581
  PrependScheme prepend_scheme = PrependScheme::kAlways;
  bool split = true;

  // Splits every piece that is not an added token.
  Status apply(std::vector<Piece>* pieces) const;

 private:
  // The sub-spans of one piece (which the stage may rewrite first).
  Status spansOf(Piece* piece, std::vector<Span>* spans) const;
  Status metaspaceSpans(Piece* piece, std::vector<Span>* spans) const;
};

Status parsePreTokenizer(const LoadContext& ctx, const json& object, const std::string& field,
                         PreTokenizer* out);

// replacement, prepend_scheme (or legacy add_prefix_space) and split of Metaspace; `split` may be
// null (the decoder has none).
Status parseMetaspaceOptions(const LoadContext& ctx, const json& object, const std::string& field,
                             std::string* replacement, PrependScheme* scheme, bool* split);

}  // namespace ree::models::tokenizer_internal
