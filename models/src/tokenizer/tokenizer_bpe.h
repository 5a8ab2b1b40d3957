// Internal to the tokenizer: the BPE model (vocabulary, merges by rank, byte fallback, unk).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer_load.h"

namespace ree::models::tokenizer_internal {

struct BpeModel {
  std::unordered_map<std::string, int32_t> vocab;
  std::unordered_map<int32_t, std::string> id_to_token;
  struct MergeResult {
    int32_t rank;
    int32_t new_id;
  };
  std::unordered_map<uint64_t, MergeResult> merges;  // key: (left id << 32) | right id
  bool has_unk = false;
  int32_t unk_id = -1;
  std::string unk_token;
  bool has_prefix = false, has_suffix = false;
  std::string continuing_subword_prefix, end_of_word_suffix;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;

  static uint64_t pairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  const MergeResult* findMerge(int32_t left, int32_t right) const {
    auto it = merges.find(pairKey(left, right));
    return it == merges.end() ? nullptr : &it->second;
  }

  // Appends the ids of one pre-tokenized word.
  void tokenize(const std::string& word, std::vector<int32_t>* out) const;

 private:
  struct Symbol {
    int32_t id;
    ptrdiff_t prev, next;
    size_t length;  // 0: merged into its left neighbour
  };
  // One symbol per character: its vocabulary id, else its <0xNN> byte tokens (byte_fallback),
  // else unk_token (runs fused with fuse_unk), else nothing.
  std::vector<Symbol> initialSymbols(const std::string& word) const;
  // tokenizers' Word::merge_all.
  void mergeAll(std::vector<Symbol>* symbols) const;
};

// Parses tokenizer.json's "model" (type BPE). Vocabulary ids must be distinct and below
// kMaxVocabEntries; every merge must name vocabulary tokens.
Status parseBpe(const LoadContext& ctx, const json& model, BpeModel* out);

}  // namespace ree::models::tokenizer_internal
