// Internal to the tokenizer: the Unigram model (SentencePiece-style pieces with log-probability
// scores), segmented by the Viterbi search of tokenizers' Unigram::encode_optimized.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer_load.h"

namespace ree::models::tokenizer_internal {

struct UnigramModel {
  std::vector<std::string> pieces;  // index = id
  std::vector<double> scores;       // index = id
  std::unordered_map<std::string, int32_t> vocab;
  std::unordered_map<int32_t, std::string> id_to_token;
  bool has_unk = false;
  int32_t unk_id = -1;
  bool byte_fallback = false;
  double min_score = 0.0;
  // Ids sorted by the bytes of their piece: a trie without nodes (see matchPrefixes).
  std::vector<int32_t> sorted_ids;
  std::array<int32_t, 256> byte_ids{};  // id of "<0xNN>", or -1

  // Appends the ids of one pre-tokenized word. Fails (kInvalidArgument) where tokenizers
  // raises MissingUnkId: a character no piece covers, and no unk_id.
  Status tokenize(const std::string& word, std::vector<int32_t>* out) const;

 private:
  // Calls `found(id, length)` for every piece that is a prefix of `text`, shortest first (the
  // order of tokenizers' trie common_prefix_search).
  template <typename Found>
  void matchPrefixes(std::string_view text, Found found) const;
  // tokenizers' encode_optimized: the best-scoring segmentation, runs of unk fused.
  Status segment(const std::string& word, std::vector<std::string_view>* pieces) const;
};

// Parses tokenizer.json's "model" of type Unigram: vocab as [[piece, score], ...] (distinct
// pieces, finite scores, not empty), unk_id (optional, must name a piece) and byte_fallback.
// `json_text` is the whole file: float scores are read from their text as tokenizers reads them
// (tokenizer_json_number.h).
Status parseUnigram(const LoadContext& ctx, const json& model, const std::string& json_text,
                    UnigramModel* out);

}  // namespace ree::models::tokenizer_internal
