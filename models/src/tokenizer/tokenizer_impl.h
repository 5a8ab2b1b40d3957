// Internal to the tokenizer: Tokenizer::Impl, the assembled pipeline of one tokenizer.json.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ree/models/tokenizer.h"
#include "tokenizer_added.h"
#include "tokenizer_decoder.h"
#include "tokenizer_model.h"
#include "tokenizer_normalizer.h"
#include "tokenizer_post_processor.h"
#include "tokenizer_pre_tokenizer.h"

namespace ree::models {

struct Tokenizer::Impl {
  std::string source;
  tokenizer_internal::Model model;
  tokenizer_internal::AddedVocabulary added;
  bool has_normalizer = false, has_pre_tokenizer = false, has_post_processor = false,
       has_decoder = false;
  tokenizer_internal::Normalizer normalizer;
  tokenizer_internal::PreTokenizer pre_tokenizer;
  tokenizer_internal::PostProcessor post_processor;
  tokenizer_internal::Decoder decoder;
  int32_t vocab_size = 0;

  Status encode(std::string_view input, bool add_special_tokens, std::vector<int32_t>* ids) const;
  Status decode(const int32_t* ids, size_t count, bool skip_special, std::string* out) const;
  // The token string decode works on (for an added token, its decode text), or null.
  const std::string* tokenOf(int32_t id) const;
};

namespace tokenizer_internal {

// Builds the pipeline from tokenizer.json text (already checked by checkJsonText).
Status parseTokenizer(const std::string& json_text, const std::string& source,
                      std::unique_ptr<Tokenizer::Impl>* out);

}  // namespace tokenizer_internal
}  // namespace ree::models
