// Fuzz target: text (and ids) through fixed small tokenizers built like real ones by
// scripts/reference/make_tokenizers.py (tests/fuzz/data/: GPT-2 byte-level BPE, Llama 3 regex +
// byte-level, Llama 2 SentencePiece-style with byte fallback; a Unigram model with byte fallback
// behind Nmt, NFKC, a small Precompiled charsmap and Replace, made by
// scripts/reference/make_unicode_tokenizers.py --fuzz-data). The first input byte picks the
// tokenizer and the flags; the rest is the text. Checks: encode never yields an id naming no token;
// decode and DecodeStream agree; a byte-level tokenizer without a normalizer gives the text back
// (decode(encode(text)) == text for valid UTF-8); the bytes read as int32 ids decode without
// failing, whatever they are.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer_checks.h"

using namespace ree;
using namespace ree::models;

namespace {

struct FixedTokenizer {
  const char* file;
  bool round_trips;  // byte-level, no normalizer: decode(encode(text)) == text
};

constexpr FixedTokenizer kTokenizers[] = {
    {"gpt2.json", false},  // lstrip/rstrip added tokens swallow spaces,
    {"llama3.json", true},
    {"llama2.json", false},
    {"unigram.json", false},
};
constexpr size_t kTokenizerCount = sizeof(kTokenizers) / sizeof(kTokenizers[0]);

std::vector<std::unique_ptr<Tokenizer>>& tokenizers() {
  static std::vector<std::unique_ptr<Tokenizer>> loaded;
  return loaded;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  for (const FixedTokenizer& fixed : kTokenizers) {
    std::unique_ptr<Tokenizer> tokenizer;
    const std::string path = std::string(REE_FUZZ_DATA_DIR) + "/" + fixed.file;
    if (Tokenizer::load(path, &tokenizer) != Status::kSuccess) {
      std::fprintf(stderr, "cannot load %s: %s\n", path.c_str(), lastErrorMessage());
      std::abort();
    }
    tokenizers().push_back(std::move(tokenizer));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  fuzz::beginInput();
  const uint8_t selector = data[0];
  const FixedTokenizer& fixed = kTokenizers[selector % kTokenizerCount];
  const Tokenizer& tokenizer = *tokenizers()[selector % kTokenizerCount];
  const bool add_special = (selector & 0x10) != 0;
  const bool skip_special = (selector & 0x20) != 0;
  const std::string_view text = fuzz::asText(data + 1, size - 1);

  std::vector<int32_t> ids;
  const bool encoded = fuzz::encodeChecked(tokenizer, text, add_special, &ids);
  if (fuzz::dumpRequested()) {
    std::printf("{\"input\":\"%s\",\"tokenizer\":\"%s\",\"add_special\":%s,\"ok\":%s,\"ids\":%s}\n",
                fuzz::inputKey(data, size).c_str(), fixed.file, add_special ? "true" : "false",
                encoded ? "true" : "false", fuzz::idsJson(ids).c_str());
  }
  const std::string decoded = fuzz::decodeChecked(tokenizer, ids, skip_special);
  if (encoded && fixed.round_trips && !add_special && !skip_special) {
    fuzz::require(decoded == text, "decode(encode(text)) differs from the text",
                  std::string(fixed.file) + ": '" + printableText(std::string(text), 200) +
                      "' -> '" + printableText(decoded, 200) + "'");
  }

  // The same bytes as ids: anything, including negative and huge ids.
  std::vector<int32_t> raw_ids((size - 1) / sizeof(int32_t));
  if (!raw_ids.empty()) std::memcpy(raw_ids.data(), data + 1, raw_ids.size() * sizeof(int32_t));
  fuzz::decodeChecked(tokenizer, raw_ids, skip_special);
  return 0;
}
