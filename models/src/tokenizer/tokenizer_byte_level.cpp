// GPT-2's byte-level alphabet (see tokenizer_byte_level.h).
#include "tokenizer_byte_level.h"

#include "tokenizer_text.h"

namespace ree::models::tokenizer_internal {
namespace {

ByteLevelAlphabet makeAlphabet() {
  ByteLevelAlphabet alphabet;
  uint32_t next_extra = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    const uint32_t cp = printable ? b : next_extra++;
    alphabet.byte_to_utf8[b] = text::encodeUtf8(cp);
    alphabet.code_point_to_byte[cp] = static_cast<uint8_t>(b);
  }
  return alphabet;
}

}  // namespace

const ByteLevelAlphabet& byteLevelAlphabet() {
  static const ByteLevelAlphabet alphabet = makeAlphabet();
  return alphabet;
}

}  // namespace ree::models::tokenizer_internal
