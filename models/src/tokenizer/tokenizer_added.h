// Internal to the tokenizer: added/special tokens (tokenizer.json "added_tokens"): their ids,
// leftmost-longest matching in the text, lstrip/rstrip/single_word.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ree/models/tokenizer.h"
#include "tokenizer_load.h"
#include "tokenizer_model.h"
#include "tokenizer_normalizer.h"
#include "tokenizer_piece.h"

namespace ree::models::tokenizer_internal {

// Leftmost-longest matching (aho-corasick MatchKind::LeftmostLongest).
class AddedMatcher {
 public:
  void add(std::string pattern, size_t token_index);
  // Orders each bucket longest first (ties in insertion order); call once after the last add.
  void finish();
  bool empty() const { return empty_; }
  // Leftmost match at or after `from`; false if none.
  bool find(std::string_view s, size_t from, size_t* begin, size_t* end, size_t* index) const;

 private:
  struct Entry {
    std::string pattern;
    size_t token_index;
  };
  std::array<std::vector<Entry>, 256> by_first_byte_;
  bool empty_ = true;
};

struct AddedVocabulary {
  std::vector<AddedToken> tokens;
  std::vector<std::string> decode_text;  // per token: the string decode uses (see parse)
  std::unordered_map<int32_t, size_t> by_id;
  std::unordered_map<std::string, size_t> by_content;
  std::unordered_set<std::string> special_contents;
  AddedMatcher raw_matcher, normalized_matcher;

  // tokenizers' AddedVocabulary::find_matches and the split on them, for one piece: the added
  // tokens of `matcher` are cut out (with lstrip/rstrip/single_word) and become their own pieces.
  void split(const AddedMatcher& matcher, Piece piece, std::vector<Piece>* out) const;
};

// Parses "added_tokens" (may be null). Each id must be the one tokenizers gives the token: its
// model id when the content is in the model vocabulary, else the number of model tokens plus the
// number of such new tokens before it in the file (and that id must not be a model id, which
// a vocabulary with gaps allows). `normalizer` (may be null) normalizes the
// patterns of tokens with normalized=true. `*vocab_size` receives one past the largest id.
Status parseAddedTokens(const LoadContext& ctx, const json& list, const Model& model,
                        const Normalizer* normalizer, AddedVocabulary* out, int32_t* vocab_size);

}  // namespace ree::models::tokenizer_internal
