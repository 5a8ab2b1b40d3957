// The public tokenizer API: the encode and decode pipelines over the stages that
// tokenizer_load.cpp assembles, and DecodeStream (docs/tokenizer.md).
//
// The pipeline mirrors `tokenizers` step for step, because exact ids depend on its order:
//   1. added tokens with normalized=false are cut out of the raw text (leftmost-longest match);
//   2. each remaining piece is normalized, then added tokens with normalized=true are cut out;
//   3. the pre-tokenizer splits the remaining pieces;
//   4. the model turns each piece into ids (BPE: merges by rank, leftmost first; Unigram: the
//      best-scoring segmentation);
//   5. the post-processor adds BOS/EOS when add_special_tokens is set.
#include "ree/models/tokenizer.h"

#include <string>
#include <utility>
#include <vector>

#include "ree/core/text.h"
#include "tokenizer_impl.h"
#include "tokenizer_text.h"

namespace ree::models {

using tokenizer_internal::Piece;

Status Tokenizer::Impl::encode(std::string_view input, bool add_special_tokens,
                               std::vector<int32_t>* ids) const {
  ids->clear();
  std::vector<Piece> pieces, next;
  Piece whole;
  whole.text = std::string(input);
  whole.at_origin = true;
  added.split(added.raw_matcher, std::move(whole), &pieces);
  for (Piece& piece : pieces) {
    if (piece.added_id < 0 && has_normalizer) {
      bool keeps_origin = true;
      REE_RETURN_IF_ERROR(normalizer.apply(&piece.text, &keeps_origin));
      piece.at_origin = piece.at_origin && keeps_origin;
    }
    added.split(added.normalized_matcher, std::move(piece), &next);
  }
  pieces.swap(next);
  if (has_pre_tokenizer) REE_RETURN_IF_ERROR(pre_tokenizer.apply(&pieces));
  for (const Piece& piece : pieces) {
    if (piece.added_id >= 0) {
      ids->push_back(piece.added_id);
    } else {
      REE_RETURN_IF_ERROR(model.tokenize(piece.text, ids));
    }
  }
  if (add_special_tokens && has_post_processor) post_processor.apply(ids);
  return Status::kSuccess;
}

// For an added token with normalized=true, tokenizers returns its normalized content (Llama 2:
// "hello world" decodes from "▁hello▁world").
const std::string* Tokenizer::Impl::tokenOf(int32_t id) const {
  auto added_it = added.by_id.find(id);
  if (added_it != added.by_id.end()) return &added.decode_text[added_it->second];
  auto model_it = model.idToToken().find(id);
  if (model_it != model.idToToken().end()) return &model_it->second;
  return nullptr;
}

Status Tokenizer::Impl::decode(const int32_t* ids, size_t count, bool skip_special,
                               std::string* out) const {
  std::vector<std::string> tokens;
  tokens.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const std::string* token = tokenOf(ids[i]);
    if (token == nullptr) continue;
    if (skip_special && added.special_contents.count(*token)) continue;
    tokens.push_back(*token);
  }
  out->clear();
  if (!has_decoder) {  // tokens joined by spaces
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) *out += ' ';
      *out += tokens[i];
    }
    return Status::kSuccess;
  }
  REE_RETURN_IF_ERROR(decoder.apply(&tokens));
  for (const std::string& t : tokens)
    *out += t;
  return Status::kSuccess;
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Status Tokenizer::encode(std::string_view input, bool add_special_tokens,
                         std::vector<int32_t>* ids) const {
  REE_CHECK_ARG(ids != nullptr, "encode: ids is null");
  REE_CHECK_ARG(text::isValidUtf8(input), "encode: text is not valid UTF-8 (%zu bytes)",
                input.size());
  try {
    return impl_->encode(input, add_special_tokens, ids);
  } catch (const std::bad_alloc&) {
    return REE_FAIL(Status::kOutOfMemory, "encode: out of memory (%zu bytes of text)",
                    input.size());
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kInternal, "encode: %s", e.what());
  }
}

Status Tokenizer::decode(const int32_t* ids, size_t count, bool skip_special_tokens,
                         std::string* text_out) const {
  REE_CHECK_ARG(text_out != nullptr, "decode: text is null");
  REE_CHECK_ARG(ids != nullptr || count == 0, "decode: ids is null");
  try {
    return impl_->decode(ids, count, skip_special_tokens, text_out);
  } catch (const std::bad_alloc&) {
    return REE_FAIL(Status::kOutOfMemory, "decode: out of memory (%zu ids)", count);
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kInternal, "decode: %s", e.what());
  }
}

int32_t Tokenizer::tokenToId(std::string_view token) const {
  const std::string key(token);
  auto added_it = impl_->added.by_content.find(key);
  if (added_it != impl_->added.by_content.end()) return impl_->added.tokens[added_it->second].id;
  auto it = impl_->model.vocab().find(key);
  return it == impl_->model.vocab().end() ? -1 : it->second;
}

bool Tokenizer::idToToken(int32_t id, std::string* token) const {
  const std::string* found = impl_->tokenOf(id);
  if (found == nullptr) return false;
  if (token) *token = *found;
  return true;
}

int32_t Tokenizer::vocabSize() const {
  return impl_->vocab_size;
}

bool Tokenizer::isSpecialToken(int32_t id) const {
  const std::string* token = impl_->tokenOf(id);
  return token != nullptr && impl_->added.special_contents.count(*token) != 0;
}

const std::vector<AddedToken>& Tokenizer::addedTokens() const {
  return impl_->added.tokens;
}
const std::string& Tokenizer::sourceName() const {
  return impl_->source;
}

// ---------------------------------------------------------------------------------------------
// DecodeStream: tokenizers' step_decode_stream, including its re-anchoring of the prefix.

DecodeStream::DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

void DecodeStream::reset() {
  ids_.clear();
  prefix_.clear();
  prefix_index_ = 0;
}

Status DecodeStream::step(int32_t id, std::string* chunk, bool* emitted) {
  REE_CHECK_ARG(chunk != nullptr, "DecodeStream::step: chunk is null");
  chunk->clear();
  if (emitted) *emitted = false;
  try {
    if (prefix_.empty() && !ids_.empty()) {
      std::string new_prefix;
      REE_RETURN_IF_ERROR(tokenizer_->decode(ids_, skip_special_tokens_, &new_prefix));
      if (!text::endsWithReplacementChar(new_prefix)) {
        prefix_ = std::move(new_prefix);
        prefix_index_ = ids_.size();
      }
    }
    ids_.push_back(id);
    std::string decoded;
    REE_RETURN_IF_ERROR(tokenizer_->decode(ids_, skip_special_tokens_, &decoded));
    if (decoded.size() > prefix_.size() && !text::endsWithReplacementChar(decoded)) {
      if (decoded.compare(0, prefix_.size(), prefix_) != 0) {
        // tokenizers raises "Invalid prefix" here: lossy decoding (U+FFFD) of an incomplete
        // byte sequence is not prefix-stable. A property of the ids, not a bug.
        return REE_FAIL(Status::kInvalidArgument,
                        "DecodeStream '%s': token %d changes the text already decoded ('%s' is no "
                        "longer a prefix of '%s'); tokenizers raises 'Invalid prefix' here too",
                        printableText(tokenizer_->sourceName(), 400).c_str(), id,
                        printableText(prefix_, 60).c_str(), printableText(decoded, 60).c_str());
      }
      *chunk = decoded.substr(prefix_.size());
      const size_t new_prefix_index = ids_.size() - prefix_index_;
      ids_.erase(ids_.begin(), ids_.begin() + static_cast<ptrdiff_t>(prefix_index_));
      REE_RETURN_IF_ERROR(tokenizer_->decode(ids_, skip_special_tokens_, &prefix_));
      prefix_index_ = new_prefix_index;
      if (emitted) *emitted = true;
    }
    return Status::kSuccess;
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kInternal, "DecodeStream::step: %s", e.what());
  }
}

Status DecodeStream::finish(std::string* chunk) {
  REE_CHECK_ARG(chunk != nullptr, "DecodeStream::finish: chunk is null");
  chunk->clear();
  if (!ids_.empty()) {
    std::string decoded;
    REE_RETURN_IF_ERROR(tokenizer_->decode(ids_, skip_special_tokens_, &decoded));
    if (decoded.size() > prefix_.size() && decoded.compare(0, prefix_.size(), prefix_) == 0) {
      *chunk = decoded.substr(prefix_.size());
    }
  }
  reset();
  return Status::kSuccess;
}

}  // namespace ree::models
