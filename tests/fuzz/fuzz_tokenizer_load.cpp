// Fuzz target: tokenizer.json text, loaded by Tokenizer::loadFromString. A tokenizer that loads
// is then used: a fixed text is encoded (with and without special tokens; every id must name a
// token) and decoded, every id up to a bound is decoded alone and through DecodeStream.
#include <memory>
#include <string>
#include <vector>

#include "tokenizer_checks.h"

using namespace ree;
using namespace ree::models;

namespace {

// Words, digits, punctuation, spaces of several kinds, accents, CJK and an emoji: enough to run
// every pre-tokenizer split and byte fallback once.
constexpr const char* kSampleText =
    "Hello, world! It's 2024:  tabs\tand\nnewlines... caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac "
    "\xf0\x9f\x98\x80 <|endoftext|> <s>x</s>";
constexpr int32_t kMaxIdsDecoded = 300;

// REE_FUZZ_DUMP: whether the tokenizer loaded and the ids of the sample text (without and with
// special tokens; null when encode failed).
void dump(const uint8_t* data, size_t size, const Tokenizer* tokenizer) {
  std::string line = "{\"input\":\"" + fuzz::inputKey(data, size) + "\",\"ok\":";
  line += tokenizer ? "true" : "false";
  if (tokenizer != nullptr) {
    for (bool add_special : {false, true}) {
      std::vector<int32_t> ids;
      const bool encoded = tokenizer->encode(kSampleText, add_special, &ids) == Status::kSuccess;
      line += add_special ? ",\"ids_special\":" : ",\"ids\":";
      line += encoded ? fuzz::idsJson(ids) : "null";
    }
  }
  std::printf("%s}\n", line.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::beginInput();
  std::unique_ptr<Tokenizer> tokenizer;
  Status status = Tokenizer::loadFromString(std::string(fuzz::asText(data, size)), "tokenizer.json",
                                            &tokenizer);
  fuzz::checkStatus(status, "Tokenizer::loadFromString");
  if (fuzz::dumpRequested()) dump(data, size, tokenizer.get());
  if (status != Status::kSuccess) {
    fuzz::require(tokenizer == nullptr, "a failed load handed out a tokenizer");
    return 0;
  }
  fuzz::require(tokenizer->vocabSize() >= 0, "a negative vocabulary size");
  for (bool add_special : {false, true}) {
    std::vector<int32_t> ids;
    fuzz::encodeChecked(*tokenizer, kSampleText, add_special, &ids);
    fuzz::decodeChecked(*tokenizer, ids, /*skip_special_tokens=*/false);
    fuzz::decodeChecked(*tokenizer, ids, /*skip_special_tokens=*/true);
  }
  std::vector<int32_t> all_ids;
  for (int32_t id = -1; id <= kMaxIdsDecoded && id <= tokenizer->vocabSize(); ++id)
    all_ids.push_back(id);
  fuzz::decodeChecked(*tokenizer, all_ids, /*skip_special_tokens=*/false);
  std::string token;
  for (int32_t id : all_ids) {
    if (tokenizer->idToToken(id, &token)) {
      const int32_t back = tokenizer->tokenToId(token);
      fuzz::require(back >= 0, "a token string of an id maps to no id", printableText(token));
    }
  }
  for (const AddedToken& added : tokenizer->addedTokens()) {
    fuzz::require(tokenizer->tokenToId(added.content) >= 0, "an added token has no id",
                  printableText(added.content));
  }
  return 0;
}
