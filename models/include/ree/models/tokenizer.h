// Hugging Face `tokenizer.json` tokenizer: encodes and decodes exactly like the Rust `tokenizers`
// library for the BPE pipelines of GPT-2, Llama 2/3, Mistral and Qwen2-style models
// (docs/tokenizer.md lists the supported components and the exact semantics reproduced).
//
// Every fallible call returns ree::Status; the message (ree::lastErrorMessage()) names the file
// and the JSON field for unsupported or malformed tokenizer.json content. No exception escapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ree/core/status.h"

namespace ree::models {

// One entry of tokenizer.json's "added_tokens": matched in the raw (or normalized) text before
// pre-tokenization, never split by the model.
struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;      // removed by decode(skip_special_tokens = true)
  bool normalized = true;    // matched in the normalized text (false: in the raw text)
  bool lstrip = false;       // swallows the whitespace on its left
  bool rstrip = false;       // swallows the whitespace on its right
  bool single_word = false;  // only matches when not inside a word
};

class Tokenizer {
 public:
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Loads a tokenizer.json file. Fails with kIoError (missing/unreadable file, malformed JSON) or
  // kUnsupported (a component or option this implementation does not reproduce), naming the file
  // and the JSON field.
  static Status load(const std::string& path, std::unique_ptr<Tokenizer>* tokenizer);
  // Same from the JSON text; `source_name` stands for the file name in error messages.
  static Status loadFromString(const std::string& json_text, const std::string& source_name,
                               std::unique_ptr<Tokenizer>* tokenizer);

  // Token ids of `text` (valid UTF-8, else kInvalidArgument). `add_special_tokens` runs the
  // post-processor (e.g. prepends BOS), as in tokenizers' encode(text, add_special_tokens).
  // Added/special tokens written inside `text` are always recognised, as tokenizers does.
  Status encode(std::string_view text, bool add_special_tokens, std::vector<int32_t>* ids) const;

  // Text of `ids`, as tokenizers' decode(ids, skip_special_tokens). Ids that name no token are
  // skipped (tokenizers does the same); invalid UTF-8 produced by byte tokens becomes U+FFFD.
  Status decode(const int32_t* ids, size_t count, bool skip_special_tokens,
                std::string* text) const;
  Status decode(const std::vector<int32_t>& ids, bool skip_special_tokens,
                std::string* text) const {
    return decode(ids.data(), ids.size(), skip_special_tokens, text);
  }

  // Id of a token string (added tokens first, then the model vocabulary), or -1.
  int32_t tokenToId(std::string_view token) const;
  // Token string of an id; false when the id names no token.
  bool idToToken(int32_t id, std::string* token) const;
  // One past the largest id of the model vocabulary and the added tokens.
  int32_t vocabSize() const;
  bool isSpecialToken(int32_t id) const;
  const std::vector<AddedToken>& addedTokens() const;
  // The path (or source name) this tokenizer was loaded from.
  const std::string& sourceName() const;

  // Opaque implementation (models/src/tokenizer/tokenizer_impl.h).
  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class DecodeStream;
};

// Incremental decoding for generation: feed ids one by one, get text as soon as it is complete
// UTF-8. Reproduces tokenizers' DecodeStream step by step (same chunks, same None results): a
// chunk is emitted when the decoded window grew and does not end in U+FFFD, so a character split
// over several byte tokens is held back until its last byte arrives.
class DecodeStream {
 public:
  // `tokenizer` must outlive the stream.
  DecodeStream(const Tokenizer& tokenizer, bool skip_special_tokens);

  // Adds `id`. `*chunk` receives the new text, or "" when nothing can be emitted yet
  // (tokenizers returns None then). `*emitted` (optional) tells the two apart. Fails with
  // kInvalidArgument where tokenizers raises "Invalid prefix" (ids that decode to broken UTF-8).
  Status step(int32_t id, std::string* chunk, bool* emitted = nullptr);
  // Emits what is still held back (an unfinished UTF-8 sequence decodes to U+FFFD, as the full
  // decode would) and resets the stream. Concatenating every chunk and the final flush gives
  // decode(all ids).
  Status finish(std::string* chunk);
  void reset();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> ids_;
  std::string prefix_;
  size_t prefix_index_ = 0;
};

}  // namespace ree::models
