// Internal to the tokenizer: the model stage, BPE or Unigram, behind one vocabulary interface
// (added tokens, the post-processor and decode only need token <-> id).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer_bpe.h"
#include "tokenizer_load.h"
#include "tokenizer_unigram.h"

namespace ree::models::tokenizer_internal {

struct Model {
  enum class Kind { kBpe, kUnigram } kind = Kind::kBpe;
  BpeModel bpe;
  UnigramModel unigram;

  const std::unordered_map<std::string, int32_t>& vocab() const {
    return kind == Kind::kBpe ? bpe.vocab : unigram.vocab;
  }
  const std::unordered_map<int32_t, std::string>& idToToken() const {
    return kind == Kind::kBpe ? bpe.id_to_token : unigram.id_to_token;
  }
  // Appends the ids of one pre-tokenized word.
  Status tokenize(const std::string& word, std::vector<int32_t>* out) const {
    if (kind == Kind::kUnigram) return unigram.tokenize(word, out);
    bpe.tokenize(word, out);
    return Status::kSuccess;
  }
};

// Parses tokenizer.json's "model" by its type (BPE when absent, as tokenizers).
// `json_text` is the whole file (see parseUnigram).
Status parseModel(const LoadContext& ctx, const json& model, const std::string& json_text,
                  Model* out);

}  // namespace ree::models::tokenizer_internal
