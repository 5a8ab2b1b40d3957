// Checks shared by the two tokenizer fuzz targets: what any loaded tokenizer must do with any text
// and any ids.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "ree/core/text.h"
#include "ree/models/tokenizer.h"

namespace ree::fuzz {

// Encodes `text` into *ids; every id must name a token. False when encode refused the text.
inline bool encodeChecked(const models::Tokenizer& tokenizer, std::string_view text,
                          bool add_special_tokens, std::vector<int32_t>* ids) {
  ids->clear();
  Status status = tokenizer.encode(text, add_special_tokens, ids);
  checkStatus(status, "Tokenizer::encode");
  if (status != Status::kSuccess) {
    ids->clear();
    return false;
  }
  std::string token;
  for (int32_t id : *ids) {
    require(id >= 0 && id < tokenizer.vocabSize() && tokenizer.idToToken(id, &token),
            "encode() produced an id that names no token", std::to_string(id));
  }
  return true;
}

// decode(ids) must succeed. DecodeStream must agree with it where `tokenizers` does: its chunks
// plus the final flush concatenate to decode(ids) unless a step failed (tokenizers' "Invalid
// prefix": a later id changed text already emitted) or the text holds U+FFFD (byte tokens that
// are not UTF-8 alone can turn into replacement characters only once their neighbours arrive,
// after an earlier chunk went out; tokenizers 0.23's DecodeStream does the same).
// Returns the decoded text.
inline std::string decodeChecked(const models::Tokenizer& tokenizer,
                                 const std::vector<int32_t>& ids, bool skip_special_tokens) {
  std::string text;
  Status status = tokenizer.decode(ids, skip_special_tokens, &text);
  checkStatus(status, "Tokenizer::decode");
  require(status == Status::kSuccess, "decode() refused ids", lastErrorMessage());
  models::DecodeStream stream(tokenizer, skip_special_tokens);
  std::string streamed, chunk;
  for (int32_t id : ids) {
    status = stream.step(id, &chunk);
    checkStatus(status, "DecodeStream::step");
    if (status != Status::kSuccess) return text;
    streamed += chunk;
  }
  status = stream.finish(&chunk);
  checkStatus(status, "DecodeStream::finish");
  if (status != Status::kSuccess) return text;
  streamed += chunk;
  if (text.find("\xef\xbf\xbd") == std::string::npos) {
    require(streamed == text, "DecodeStream chunks do not concatenate to decode()",
            "decode: '" + printableText(text, 200) + "' stream: '" + printableText(streamed, 200) +
                "'");
  }
  return text;
}

}  // namespace ree::fuzz
